//! Directives and the configurations they fill.
//!
//! - `smart_limit_zone NAME key=value...` (http): declares a room and its store ([`zone`]).
//! - `smart_limit_secret FILE` (http): ticket keys, one per line; the first encrypts.
//! - `smart_limit_token_key FILE... [issuer=] [bearer=]` (http): admission tokens' keys
//!   ([`token`]).
//! - `smart_limit_event NAME room=ROOM start=T ...` (http): a room's scheduled event
//!   ([`event`]).
//! - `smart_limit NAME | off`, `smart_limit_status CODE`, `smart_limit_refresh TIME`,
//!   `smart_limit_bypass VALUE`, `smart_limit_page FILE`, `smart_limit_dry_run on | off |
//!   VALUE` (http, server, location): [`location`].
//! - `smart_limit_metrics`, `smart_limit_control`, `smart_limit_poll` (location): each
//!   endpoint owns its directive (`crate::endpoint`).
//!
//! Every refusal names the directive and the value, so `nginx -t` says what to fix.

use core::ffi::{c_char, c_void};
use core::ptr::{self, NonNull};
use std::cell::RefCell;
use std::rc::Rc;

use ngx::ffi::{ngx_conf_t, ngx_http_complex_value_t, NGX_LOG_WARN};
use ngx::http::HttpModuleMainConf;
use ngx::ngx_conf_log_error;
use smart_limit_core::page::Template;
use smart_limit_core::ticket::Keyring;
use smart_limit_core::token::Tokens;

use crate::rate::RateZone;
use crate::store::Zone;
use crate::Module;

pub mod directive;
pub mod event;
pub mod location;
pub mod rate;
pub mod token;
pub mod zone;

pub use directive::Setter;

// Configurations live in nginx's pools, which align to the word size only.
const _: () = assert!(core::mem::align_of::<MainConf>() <= core::mem::align_of::<usize>());
const _: () = assert!(core::mem::align_of::<LocConf>() <= core::mem::align_of::<usize>());

/// http-level configuration: the rooms and the ticket keys.
#[derive(Default)]
pub struct MainConf {
    /// Every declared room. Each `Zone` is allocated in the cycle pool and lives as long as
    /// the configuration does.
    pub zones: Vec<NonNull<Zone>>,
    /// Keys from `smart_limit_secret`; without it each zone keeps a random key in its shared
    /// memory (it survives reloads, not restarts).
    pub keys: Option<Keyring>,
    /// `smart_limit_token_key`: admission tokens' keys and settings ([S28]).
    pub tokens: Option<Tokens>,
    /// Every `smart_limit_rate_zone`, allocated in the cycle pool like the rooms.
    pub rate_zones: Vec<NonNull<RateZone>>,
    /// Every `smart_limit_event`, in declaration order, with its page (`page=`, read with
    /// the configuration); each room also gets its own.
    pub events: Vec<(smart_limit_core::event::EventSpec, Option<Rc<Template>>)>,
    /// Pages already warned about for a zone with `challenge=pow` (the page's address, the
    /// zone's index): each pair is named once, however many locations inherit it.
    pub challenge_page_warnings: RefCell<Vec<(usize, usize)>>,
}

impl MainConf {
    /// The module's http configuration of a cycle (None without an http block), for the
    /// process hooks.
    pub fn of_cycle(cycle: *mut ngx::ffi::ngx_cycle_t) -> Option<&'static MainConf> {
        use ngx::http::{HttpModule, HttpModuleConfExt};
        // SAFETY: nginx passes the live cycle to init_process/exit_process; its http main
        // configuration for this module is a MainConf (create_main_conf), or absent without
        // http. It lives as long as the cycle.
        unsafe {
            let conf = cycle
                .as_ref()?
                .http_main_conf_unchecked::<MainConf>(Module::module())?;
            Some(&*conf.as_ptr())
        }
    }

    /// The zones, in declaration order.
    pub fn zones(&self) -> impl Iterator<Item = &'static Zone> + '_ {
        // SAFETY: zones live in the cycle pool for as long as this configuration, which
        // outlives every request and callback that can reach it.
        self.zones.iter().map(|z| unsafe { z.as_ref() })
    }

    pub fn zone(&self, name: &str) -> Option<&'static Zone> {
        self.zones().find(|z| z.params.name == name)
    }

    /// The fleet rate zones, in declaration order.
    pub fn rate_zones(&self) -> impl Iterator<Item = &'static RateZone> + '_ {
        // SAFETY: rate zones live in the cycle pool for as long as this configuration.
        self.rate_zones.iter().map(|z| unsafe { z.as_ref() })
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

/// What a location does with the module's endpoints.
#[derive(Default, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    #[default]
    None,
    /// `smart_limit_metrics`: Prometheus text.
    Metrics,
    /// `smart_limit_control`: rooms as JSON, run-time mode switch.
    Control,
    /// `smart_limit_jwks`: the admission tokens' public keys.
    Jwks,
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
    /// Waiting-page template from `smart_limit_page`, prepared at configuration time.
    pub page: Option<Rc<Template>>,
    pub endpoint: Endpoint,
    /// `smart_limit_poll`: the module answers admitted visitors itself ("admitted").
    pub poll: bool,
    pub dry_run: DryRun,
    /// `smart_limit_rate NAME | off`: the fleet rate zone (an index into
    /// `MainConf::rate_zones`, resolved when locations merge).
    pub rate: RoomRef,
    pub rate_name: Option<String>,
    /// `smart_limit_rate_status`: the status of a request the rate limits (default 503).
    pub rate_status: Option<u16>,
    /// `smart_limit_documents NAME | off`: the room that decides page views at their
    /// document in this location, before `limit_req` ([S29], `crate::handler::front`).
    pub documents: RoomRef,
    /// Name given to `smart_limit_documents` until it is resolved.
    pub documents_name: Option<String>,
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
            endpoint: Endpoint::None,
            poll: false,
            dry_run: DryRun::Unset,
            rate: RoomRef::Unset,
            rate_name: None,
            rate_status: None,
            documents: RoomRef::Unset,
            documents_name: None,
        }
    }
}

pub const DEFAULT_STATUS: u16 = 503;
pub const DEFAULT_REFRESH_SECS: u64 = 10;
pub const DEFAULT_RATE_STATUS: u16 = 503;

impl LocConf {
    pub fn zone(&self, mcf: &MainConf) -> Option<&'static Zone> {
        match self.room {
            // SAFETY: zones live in the cycle pool for as long as this configuration.
            RoomRef::Named(i) => mcf.zones.get(i).map(|z| unsafe { z.as_ref() }),
            _ => None,
        }
    }

    /// The room of `smart_limit_documents`, if this location has one.
    pub fn documents_zone(&self, mcf: &MainConf) -> Option<&'static Zone> {
        match self.documents {
            // SAFETY: zones live in the cycle pool for as long as this configuration.
            RoomRef::Named(i) => mcf.zones.get(i).map(|z| unsafe { z.as_ref() }),
            _ => None,
        }
    }

    pub fn rate_zone(&self, mcf: &MainConf) -> Option<&'static RateZone> {
        match self.rate {
            // SAFETY: rate zones live in the cycle pool for as long as this configuration.
            RoomRef::Named(i) => mcf.rate_zones.get(i).map(|z| unsafe { z.as_ref() }),
            _ => None,
        }
    }

    pub fn rate_status(&self) -> u16 {
        self.rate_status.unwrap_or(DEFAULT_RATE_STATUS)
    }

    pub fn status(&self) -> u16 {
        self.status.unwrap_or(DEFAULT_STATUS)
    }

    pub fn refresh_secs(&self) -> u64 {
        self.refresh_secs.unwrap_or(DEFAULT_REFRESH_SECS)
    }

    pub fn bypass(&self) -> Option<&ngx_http_complex_value_t> {
        // SAFETY: null, or a complex value compiled into the configuration's pool.
        unsafe { self.bypass.as_ref() }
    }

    /// Inherits what this location does not set from the enclosing level.
    fn merge(&mut self, prev: &LocConf) {
        if self.room == RoomRef::Unset {
            self.room = prev.room;
        }
        if self.status.is_none() {
            self.status = prev.status;
        }
        if self.refresh_secs.is_none() {
            self.refresh_secs = prev.refresh_secs;
        }
        if self.bypass.is_null() {
            self.bypass = prev.bypass;
        }
        if self.page.is_none() {
            self.page = prev.page.clone();
        }
        if self.dry_run == DryRun::Unset {
            self.dry_run = prev.dry_run;
        }
        if self.rate == RoomRef::Unset {
            self.rate = prev.rate;
        }
        if self.rate_status.is_none() {
            self.rate_status = prev.rate_status;
        }
        if self.documents == RoomRef::Unset {
            self.documents = prev.documents;
        }
    }
}

/// Runs once the http block is read: gives every zone its keys.
pub unsafe extern "C" fn init_main_conf(cf: *mut ngx_conf_t, conf: *mut c_void) -> *mut c_char {
    directive::run(cf, |cf| {
        // SAFETY: nginx passes this module's main configuration (create_main_conf).
        let mcf = unsafe { conf.cast::<MainConf>().as_mut() }.ok_or(directive::Refused)?;
        share_keys(cf, mcf);
        event::check(cf, mcf)?;
        smart_limit_core::page::prepare_builtin();
        Ok(())
    })
}

fn share_keys(cf: &mut ngx_conf_t, mcf: &mut MainConf) {
    if mcf.keys.is_none() && !mcf.zones.is_empty() {
        ngx_conf_log_error!(
            NGX_LOG_WARN,
            cf,
            "smart_limit_secret is not set: tickets use a random key kept in each zone; \
             they do not survive a restart and are not shared by a fleet"
        );
        // A fleet room without shared keys: a ticket from one node is a stranger on the next.
        for z in mcf.zones().filter(|z| z.is_central()) {
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
        // SAFETY: zones live in the cycle pool; configuration is single-threaded and nothing
        // else holds a reference to the zone while the http block is finished.
        let z = unsafe { z.as_mut() };
        z.keys = mcf.keys.clone();
        z.tokens = mcf.tokens.clone();
    }
}

/// Inherits unset location settings and resolves `smart_limit NAME` to its zone.
pub unsafe extern "C" fn merge_loc_conf(
    cf: *mut ngx_conf_t,
    parent: *mut c_void,
    child: *mut c_void,
) -> *mut c_char {
    directive::run(cf, |cf| {
        // SAFETY: nginx passes two of this module's location configurations (create_loc_conf):
        // the enclosing level's and this one; they are distinct.
        let (prev, conf) = unsafe {
            (
                parent.cast::<LocConf>().as_mut(),
                child.cast::<LocConf>().as_mut(),
            )
        };
        let (Some(prev), Some(conf)) = (prev, conf) else {
            return Err(directive::Refused);
        };
        let mcf = Module::main_conf(cf).ok_or(directive::Refused)?;
        // The parent may be the http or server level, whose own name was never merged.
        resolve(cf, mcf, prev)?;
        resolve(cf, mcf, conf)?;
        rate::resolve(cf, mcf, prev)?;
        rate::resolve(cf, mcf, conf)?;
        conf.merge(prev);
        warn_page_without_solver(cf, mcf, conf);
        Ok(())
    })
}

/// `nginx -t` warns when a location's room has `challenge=pow` and its `smart_limit_page` has
/// no `{{challenge_script}}`: the challenge is then answered with the built-in page, not the
/// operator's (see `Template::hosts_challenge`).
fn warn_page_without_solver(cf: &mut ngx_conf_t, mcf: &MainConf, conf: &LocConf) {
    let (Some(page), RoomRef::Named(i)) = (conf.page.as_ref(), conf.room) else {
        return;
    };
    let Some(zone) = conf.zone(mcf) else {
        return;
    };
    if zone.params.challenge.is_none() || page.hosts_challenge() {
        return;
    }
    let pair = (Rc::as_ptr(page) as usize, i);
    let mut warned = mcf.challenge_page_warnings.borrow_mut();
    if warned.contains(&pair) {
        return;
    }
    warned.push(pair);
    ngx_conf_log_error!(
        NGX_LOG_WARN,
        cf,
        "smart_limit_page has no {{{{challenge_script}}}} but zone \"{}\" has challenge=pow: \
         its challenge is answered with the built-in page; add {{{{challenge_script}}}} to the \
         page to host it there",
        zone.params.name
    );
}

/// Turns the names given to `smart_limit` and `smart_limit_documents` into their zones'
/// indexes.
fn resolve(
    cf: &mut ngx_conf_t,
    mcf: &MainConf,
    conf: &mut LocConf,
) -> Result<(), directive::Refused> {
    if let Some(name) = conf.room_name.take() {
        conf.room = RoomRef::Named(zone_index(cf, mcf, "smart_limit", &name)?);
    }
    if let Some(name) = conf.documents_name.take() {
        conf.documents = RoomRef::Named(zone_index(cf, mcf, "smart_limit_documents", &name)?);
    }
    Ok(())
}

fn zone_index(
    cf: &mut ngx_conf_t,
    mcf: &MainConf,
    what: &str,
    name: &str,
) -> Result<usize, directive::Refused> {
    mcf.zones()
        .position(|z| z.params.name == name)
        .ok_or_else(|| {
            ngx_conf_log_error!(
                ngx::ffi::NGX_LOG_EMERG,
                cf,
                "\"{}\" names unknown zone \"{}\": declare it with smart_limit_zone",
                what,
                name
            );
            directive::Refused
        })
}
