//! Directives and the configurations they fill.
//!
//! - `smart_limit_zone NAME key=value...` (http): declares a room and its store ([`Zone`]).
//! - `smart_limit_secret FILE` (http): ticket keys, one per line; the first encrypts.
//! - `smart_limit NAME | off`, `smart_limit_status CODE`, `smart_limit_refresh TIME`,
//!   `smart_limit_bypass VALUE`, `smart_limit_page FILE` (http, server, location).
//! - `smart_limit_dry_run on | off | VALUE` (http, server, location): decide, log, but pass.
//! - `smart_limit_metrics`, `smart_limit_control` (location): content handlers;
//!   `smart_limit_poll` (location): the module answers admitted visitors too (status endpoint).
//!
//! Every refusal names the directive and the value, so `nginx -t` says what to fix.

use core::ffi::{c_char, c_void};
use core::ptr::{self, NonNull};

use ngx::core::{Pool, Status, NGX_CONF_ERROR, NGX_CONF_OK};
use ngx::ffi::{
    ngx_command_t, ngx_conf_full_name, ngx_conf_t, ngx_http_compile_complex_value,
    ngx_http_compile_complex_value_t, ngx_http_complex_value_t, ngx_str_t, NGX_LOG_EMERG,
    NGX_LOG_WARN,
};
use ngx::http::{HttpModuleLocationConf, HttpModuleMainConf, NgxHttpCoreModule};
use ngx::ngx_conf_log_error;
use smart_limit_core::parse::{self, AdmitMode, ZoneParams};
use smart_limit_core::ticket::Keyring;

use crate::store::Zone;
use crate::Module;

pub type Setter =
    unsafe extern "C" fn(*mut ngx_conf_t, *mut ngx_command_t, *mut c_void) -> *mut c_char;

/// Declares the `extern "C"` entry point nginx calls for a configuration callback: a panic
/// inside it (it would abort `nginx -t`, or the master during a reload) becomes a refusal.
macro_rules! guarded {
    (directive $name:ident => $inner:ident) => {
        guarded!($name => $inner(cf: *mut ngx_conf_t, cmd: *mut ngx_command_t, conf: *mut c_void));
    };
    ($name:ident => $inner:ident ($($arg:ident: $ty:ty),*)) => {
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> *mut c_char {
            std::panic::catch_unwind(core::panic::AssertUnwindSafe(|| unsafe { $inner($($arg),*) }))
                .unwrap_or(NGX_CONF_ERROR)
        }
    };
}

guarded!(directive set_zone => set_zone_unguarded);
guarded!(directive set_secret => set_secret_unguarded);
guarded!(directive set_room => set_room_unguarded);
guarded!(directive set_status => set_status_unguarded);
guarded!(directive set_refresh => set_refresh_unguarded);
guarded!(directive set_bypass => set_bypass_unguarded);
guarded!(directive set_dry_run => set_dry_run_unguarded);
guarded!(directive set_page => set_page_unguarded);
guarded!(directive set_metrics => set_metrics_unguarded);
guarded!(directive set_control => set_control_unguarded);
guarded!(directive set_poll => set_poll_unguarded);
guarded!(init_main_conf => init_main_conf_unguarded(cf: *mut ngx_conf_t, conf: *mut c_void));
guarded!(merge_loc_conf => merge_loc_conf_unguarded(cf: *mut ngx_conf_t, parent: *mut c_void, child: *mut c_void));

/// http-level configuration: the rooms and the ticket keys.
#[derive(Default)]
pub struct MainConf {
    /// Every declared room. Each `Zone` is allocated in the cycle pool and lives as long as
    /// the configuration does.
    pub zones: Vec<NonNull<Zone>>,
    /// Keys from `smart_limit_secret`; without it each zone keeps a random key in its shared
    /// memory (it survives reloads, not restarts).
    pub keys: Option<Keyring>,
}

impl MainConf {
    pub fn zone(&self, name: &str) -> Option<NonNull<Zone>> {
        self.zones
            .iter()
            .copied()
            // SAFETY: zones live in the cycle pool for as long as this configuration.
            .find(|z| unsafe { z.as_ref() }.params.name == name)
    }
}

/// What `smart_limit` says for a location: unset (inherit), off, or a room.
#[derive(Default, Clone, Copy, PartialEq, Eq)]
pub enum RoomRef {
    #[default]
    Unset,
    Off,
    /// Index into `MainConf::zones`, resolved when locations merge (so a location may name a
    /// zone declared further down the http block).
    Named(usize),
}

/// Per-location settings.
pub struct LocConf {
    pub room: RoomRef,
    /// Name given to `smart_limit` until it is resolved.
    pub room_name: Option<String>,
    /// Status code of the waiting answer (default 503).
    pub status: Option<u16>,
    /// Seconds between refreshes of the waiting page (default 10).
    pub refresh_secs: Option<u64>,
    /// `smart_limit_bypass`: a non-empty value other than "0" lets the request pass untouched.
    pub bypass: *mut ngx_http_complex_value_t,
    /// Waiting-page template from `smart_limit_page`.
    pub page: Option<std::rc::Rc<str>>,
    /// This location serves Prometheus metrics.
    pub metrics: bool,
    /// This location serves the control endpoint (room modes).
    pub control: bool,
    /// `smart_limit_poll`: the module answers admitted visitors itself ("admitted").
    pub poll: bool,
    /// `smart_limit_dry_run`.
    pub dry_run: DryRun,
}

/// `smart_limit_dry_run`: like `limit_req_dry_run`, the room decides and counts as usual, the
/// decision is logged and recorded in `$smart_limit_status`, and the request passes anyway.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum DryRun {
    Unset,
    Off,
    On,
    /// A value with variables: dry run when it is non-empty and not "0" or "off".
    Var(*mut ngx_http_complex_value_t),
}

impl Default for LocConf {
    fn default() -> Self {
        LocConf {
            room: RoomRef::Unset,
            room_name: None,
            status: None,
            refresh_secs: None,
            bypass: ptr::null_mut(),
            page: None,
            metrics: false,
            control: false,
            poll: false,
            dry_run: DryRun::Unset,
        }
    }
}

pub const DEFAULT_STATUS: u16 = 503;
pub const DEFAULT_REFRESH_SECS: u64 = 10;

impl LocConf {
    pub fn zone<'a>(&self, mcf: &'a MainConf) -> Option<&'a Zone> {
        match self.room {
            // SAFETY: zones live in the cycle pool for as long as this configuration.
            RoomRef::Named(i) => mcf.zones.get(i).map(|z| unsafe { z.as_ref() }),
            _ => None,
        }
    }

    pub fn status(&self) -> u16 {
        self.status.unwrap_or(DEFAULT_STATUS)
    }

    pub fn refresh_secs(&self) -> u64 {
        self.refresh_secs.unwrap_or(DEFAULT_REFRESH_SECS)
    }
}

/// The directive's arguments after its name, as UTF-8 strings.
unsafe fn args<'a>(cf: *mut ngx_conf_t) -> Result<Vec<&'a str>, ()> {
    let all: &[ngx_str_t] = (*(*cf).args).as_slice();
    let mut out = Vec::with_capacity(all.len().saturating_sub(1));
    for a in all.iter().skip(1) {
        match a.to_str() {
            Ok(s) => out.push(s),
            Err(_) => {
                ngx_conf_log_error!(
                    NGX_LOG_EMERG,
                    cf,
                    "\"{}\" argument is not valid UTF-8",
                    directive(cf)
                );
                return Err(());
            }
        }
    }
    Ok(out)
}

unsafe fn directive<'a>(cf: *mut ngx_conf_t) -> &'a str {
    let all: &[ngx_str_t] = (*(*cf).args).as_slice();
    all.first().and_then(|a| a.to_str().ok()).unwrap_or("?")
}

/// Logs `"directive" message` at emerg level and returns the nginx refusal.
unsafe fn refuse(cf: *mut ngx_conf_t, msg: impl core::fmt::Display) -> *mut c_char {
    ngx_conf_log_error!(NGX_LOG_EMERG, cf, "\"{}\" {}", directive(cf), msg);
    NGX_CONF_ERROR
}

/// `smart_limit_zone NAME [size=] [store=] ...`
unsafe fn set_zone_unguarded(
    cf: *mut ngx_conf_t,
    _cmd: *mut ngx_command_t,
    conf: *mut c_void,
) -> *mut c_char {
    let mcf = &mut *(conf as *mut MainConf);
    let Ok(args) = args(cf) else {
        return NGX_CONF_ERROR;
    };
    let mut params = match ZoneParams::parse(&args) {
        Ok(p) => p,
        Err(e) => return refuse(cf, e),
    };
    // With `session=` an admitted user stays active until the session ends after their last
    // request (Cloudflare's session duration): unless `active_window=` says otherwise, count
    // a session as active for exactly that long, so `max_active` counts every ticket that
    // still admits and no more.
    if let AdmitMode::Session(ms) = params.admit {
        if !args.iter().any(|a| a.starts_with("active_window=")) {
            params.active_window_ms = ms;
        }
    }
    if mcf.zone(&params.name).is_some() {
        return refuse(
            cf,
            format_args!("zone \"{}\" is already declared", params.name),
        );
    }
    match crate::store::add_zone(cf, params) {
        Ok(zone) => {
            mcf.zones.push(zone);
            NGX_CONF_OK
        }
        Err(e) => refuse(cf, e),
    }
}

/// `smart_limit_secret FILE`: the ticket keys.
unsafe fn set_secret_unguarded(
    cf: *mut ngx_conf_t,
    _cmd: *mut ngx_command_t,
    conf: *mut c_void,
) -> *mut c_char {
    let mcf = &mut *(conf as *mut MainConf);
    if mcf.keys.is_some() {
        return refuse(cf, "is duplicate");
    }
    let all: &mut [ngx_str_t] = (*(*cf).args).as_slice_mut();
    let Some(name) = all.get_mut(1) else {
        return NGX_CONF_ERROR;
    };
    // Relative paths are relative to the configuration prefix, as for other nginx files.
    if ngx_conf_full_name((*cf).cycle, name, 1) != Status::NGX_OK.0 {
        return NGX_CONF_ERROR;
    }
    let path = name.to_string();
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => return refuse(cf, format_args!("cannot read \"{path}\": {e}")),
    };
    match Keyring::parse(&text) {
        Ok(k) => {
            mcf.keys = Some(k);
            NGX_CONF_OK
        }
        Err(e) => refuse(cf, format_args!("\"{path}\": {e}")),
    }
}

/// `smart_limit NAME | off`
unsafe fn set_room_unguarded(
    cf: *mut ngx_conf_t,
    _cmd: *mut ngx_command_t,
    conf: *mut c_void,
) -> *mut c_char {
    let lcf = &mut *(conf as *mut LocConf);
    if lcf.room != RoomRef::Unset || lcf.room_name.is_some() {
        return refuse(cf, "is duplicate");
    }
    let Ok(args) = args(cf) else {
        return NGX_CONF_ERROR;
    };
    match args.first() {
        Some(&"off") => lcf.room = RoomRef::Off,
        Some(name) if !name.is_empty() => lcf.room_name = Some((*name).to_string()),
        _ => return refuse(cf, "needs a zone name or \"off\""),
    }
    NGX_CONF_OK
}

/// `smart_limit_status 200|202|429|503`
unsafe fn set_status_unguarded(
    cf: *mut ngx_conf_t,
    _cmd: *mut ngx_command_t,
    conf: *mut c_void,
) -> *mut c_char {
    let lcf = &mut *(conf as *mut LocConf);
    if lcf.status.is_some() {
        return refuse(cf, "is duplicate");
    }
    let Ok(args) = args(cf) else {
        return NGX_CONF_ERROR;
    };
    let value = args.first().copied().unwrap_or("");
    match parse::parse_status(value) {
        Ok(code) => {
            lcf.status = Some(code);
            NGX_CONF_OK
        }
        Err(e) => refuse(cf, format_args!("invalid value \"{value}\": {e}")),
    }
}

/// `smart_limit_refresh TIME`: how often the waiting page reloads itself (and `Retry-After`).
unsafe fn set_refresh_unguarded(
    cf: *mut ngx_conf_t,
    _cmd: *mut ngx_command_t,
    conf: *mut c_void,
) -> *mut c_char {
    let lcf = &mut *(conf as *mut LocConf);
    if lcf.refresh_secs.is_some() {
        return refuse(cf, "is duplicate");
    }
    let Ok(args) = args(cf) else {
        return NGX_CONF_ERROR;
    };
    let value = args.first().copied().unwrap_or("");
    match parse::parse_time_ms(value) {
        Ok(ms) if (1000..=3_600_000).contains(&ms) => {
            lcf.refresh_secs = Some(ms / 1000);
            NGX_CONF_OK
        }
        Ok(_) => refuse(
            cf,
            format_args!("invalid value \"{value}\": must be between 1s and 1h"),
        ),
        Err(e) => refuse(cf, format_args!("invalid value \"{value}\": {e}")),
    }
}

/// `smart_limit_bypass VALUE` (variables allowed).
unsafe fn set_bypass_unguarded(
    cf: *mut ngx_conf_t,
    _cmd: *mut ngx_command_t,
    conf: *mut c_void,
) -> *mut c_char {
    let lcf = &mut *(conf as *mut LocConf);
    if !lcf.bypass.is_null() {
        return refuse(cf, "is duplicate");
    }
    match compile_arg(cf) {
        Some(cv) => {
            lcf.bypass = cv;
            NGX_CONF_OK
        }
        None => NGX_CONF_ERROR,
    }
}

/// Compiles the directive's first argument as a value that may hold variables.
unsafe fn compile_arg(cf: *mut ngx_conf_t) -> Option<*mut ngx_http_complex_value_t> {
    let pool = Pool::from_ngx_pool((*cf).pool);
    let cv = pool.calloc_type::<ngx_http_complex_value_t>();
    if cv.is_null() {
        return None;
    }
    let all: &mut [ngx_str_t] = (*(*cf).args).as_slice_mut();
    let value = all.get_mut(1)?;
    let mut ccv: ngx_http_compile_complex_value_t = core::mem::zeroed();
    ccv.cf = cf;
    ccv.value = value;
    ccv.complex_value = cv;
    if ngx_http_compile_complex_value(&mut ccv) != Status::NGX_OK.0 {
        return None;
    }
    Some(cv)
}

/// `smart_limit_dry_run on | off | VALUE`: a value with variables turns dry run on per
/// request when it is non-empty and not "0" or "off" (e.g. from `map` or `geo`).
unsafe fn set_dry_run_unguarded(
    cf: *mut ngx_conf_t,
    _cmd: *mut ngx_command_t,
    conf: *mut c_void,
) -> *mut c_char {
    let lcf = &mut *(conf as *mut LocConf);
    if lcf.dry_run != DryRun::Unset {
        return refuse(cf, "is duplicate");
    }
    let Ok(args) = args(cf) else {
        return NGX_CONF_ERROR;
    };
    let value = args.first().copied().unwrap_or("");
    lcf.dry_run = match value {
        "on" => DryRun::On,
        "off" => DryRun::Off,
        v if v.contains('$') => match compile_arg(cf) {
            Some(cv) => DryRun::Var(cv),
            None => return NGX_CONF_ERROR,
        },
        v => {
            return refuse(
                cf,
                format_args!(
                    "invalid value \"{}\": expected on, off, or a value with variables",
                    v.escape_default()
                ),
            )
        }
    };
    NGX_CONF_OK
}

/// `smart_limit_page FILE`: a template for the waiting page, read once at configuration time.
unsafe fn set_page_unguarded(
    cf: *mut ngx_conf_t,
    _cmd: *mut ngx_command_t,
    conf: *mut c_void,
) -> *mut c_char {
    let lcf = &mut *(conf as *mut LocConf);
    if lcf.page.is_some() {
        return refuse(cf, "is duplicate");
    }
    let all: &mut [ngx_str_t] = (*(*cf).args).as_slice_mut();
    let Some(name) = all.get_mut(1) else {
        return NGX_CONF_ERROR;
    };
    if ngx_conf_full_name((*cf).cycle, name, 1) != Status::NGX_OK.0 {
        return NGX_CONF_ERROR;
    }
    let path = name.to_string();
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => return refuse(cf, format_args!("cannot read \"{path}\": {e}")),
    };
    if let Err(e) = smart_limit_core::page::check_template(&text) {
        return refuse(cf, format_args!("\"{path}\": {e}"));
    }
    lcf.page = Some(text.into());
    NGX_CONF_OK
}

/// `smart_limit_metrics`: this location answers with Prometheus text.
unsafe fn set_metrics_unguarded(
    cf: *mut ngx_conf_t,
    _cmd: *mut ngx_command_t,
    conf: *mut c_void,
) -> *mut c_char {
    let lcf = &mut *(conf as *mut LocConf);
    if lcf.metrics || lcf.control {
        return refuse(cf, "is duplicate or combined with smart_limit_control");
    }
    if set_content_handler(cf, crate::metrics::content_handler).is_err() {
        return NGX_CONF_ERROR;
    }
    lcf.metrics = true;
    NGX_CONF_OK
}

/// `smart_limit_control`: this location shows the rooms (GET) and switches their mode (POST).
unsafe fn set_control_unguarded(
    cf: *mut ngx_conf_t,
    _cmd: *mut ngx_command_t,
    conf: *mut c_void,
) -> *mut c_char {
    let lcf = &mut *(conf as *mut LocConf);
    if lcf.metrics || lcf.control {
        return refuse(cf, "is duplicate or combined with smart_limit_metrics");
    }
    if set_content_handler(cf, crate::control::content_handler).is_err() {
        return NGX_CONF_ERROR;
    }
    lcf.control = true;
    NGX_CONF_OK
}

/// `smart_limit_poll`: a status endpoint for programs. The module answers every request of
/// this location itself: waiting and closed answers as usual, and an admitted visitor gets
/// `{"status":"admitted",...}` (or the "it's your turn" page) with its ticket, so a mobile
/// app can poll a light URL and then call the real API with the ticket cookie.
unsafe fn set_poll_unguarded(
    cf: *mut ngx_conf_t,
    _cmd: *mut ngx_command_t,
    conf: *mut c_void,
) -> *mut c_char {
    let lcf = &mut *(conf as *mut LocConf);
    if lcf.poll {
        return refuse(cf, "is duplicate");
    }
    lcf.poll = true;
    NGX_CONF_OK
}

/// Makes `handler` the location's content handler (as `stub_status` does).
unsafe fn set_content_handler(
    cf: *mut ngx_conf_t,
    handler: unsafe extern "C" fn(*mut ngx::ffi::ngx_http_request_t) -> ngx::ffi::ngx_int_t,
) -> Result<(), ()> {
    let Some(clcf) = NgxHttpCoreModule::location_conf_mut(&*cf) else {
        return Err(());
    };
    if clcf.handler.is_some() {
        ngx_conf_log_error!(
            NGX_LOG_EMERG,
            cf,
            "\"{}\": this location already has a content handler (proxy_pass, root with \
             another module, ...)",
            directive(cf)
        );
        return Err(());
    }
    clcf.handler = Some(handler);
    Ok(())
}

/// Runs once the http block is read: gives every zone its keys.
unsafe fn init_main_conf_unguarded(cf: *mut ngx_conf_t, conf: *mut c_void) -> *mut c_char {
    let mcf = &mut *(conf as *mut MainConf);
    if mcf.keys.is_none() && !mcf.zones.is_empty() {
        ngx_conf_log_error!(
            NGX_LOG_WARN,
            cf,
            "smart_limit_secret is not set: tickets use a random key kept in each zone; \
             they do not survive a restart and are not shared by a fleet"
        );
        // A fleet room without shared keys: a ticket from one node is a stranger on the next.
        for z in mcf.zones.iter().map(|z| z.as_ref()) {
            if z.redis.is_none() {
                continue;
            }
            ngx_conf_log_error!(
                NGX_LOG_WARN,
                cf,
                "smart_limit_zone \"{}\" has store=redis but smart_limit_secret is not set: \
                 each node seals tickets with its own key, so a client loses its place when \
                 it reaches another node; give every node the same key file",
                z.params.name
            );
        }
    }
    for z in mcf.zones.iter_mut() {
        z.as_mut().keys = mcf.keys.clone();
    }
    NGX_CONF_OK
}

/// Inherits unset location settings and resolves `smart_limit NAME` to its zone.
unsafe fn merge_loc_conf_unguarded(
    cf: *mut ngx_conf_t,
    parent: *mut c_void,
    child: *mut c_void,
) -> *mut c_char {
    let conf = &mut *(child as *mut LocConf);
    let Some(mcf) = Module::main_conf(&*((*cf).ctx as *const ngx::ffi::ngx_http_conf_ctx_t)) else {
        return NGX_CONF_ERROR;
    };
    // The parent may be the http or server level, whose own name was never merged.
    let prev_mut = &mut *(parent as *mut LocConf);
    if resolve(cf, mcf, prev_mut).is_err() || resolve(cf, mcf, conf).is_err() {
        return NGX_CONF_ERROR;
    }
    let prev = &*prev_mut;
    if conf.room == RoomRef::Unset {
        conf.room = prev.room;
    }
    if conf.status.is_none() {
        conf.status = prev.status;
    }
    if conf.refresh_secs.is_none() {
        conf.refresh_secs = prev.refresh_secs;
    }
    if conf.bypass.is_null() {
        conf.bypass = prev.bypass;
    }
    if conf.page.is_none() {
        conf.page = prev.page.clone();
    }
    if conf.dry_run == DryRun::Unset {
        conf.dry_run = prev.dry_run;
    }
    NGX_CONF_OK
}

/// Turns the name given to `smart_limit` into its zone's index.
unsafe fn resolve(cf: *mut ngx_conf_t, mcf: &MainConf, conf: &mut LocConf) -> Result<(), ()> {
    let Some(name) = conf.room_name.take() else {
        return Ok(());
    };
    match mcf
        .zones
        .iter()
        .position(|z| z.as_ref().params.name == name)
    {
        Some(i) => {
            conf.room = RoomRef::Named(i);
            Ok(())
        }
        None => {
            ngx_conf_log_error!(
                NGX_LOG_EMERG,
                cf,
                "\"smart_limit\" names unknown zone \"{}\": declare it with smart_limit_zone",
                name
            );
            Err(())
        }
    }
}
