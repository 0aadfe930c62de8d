//! smart_limit: a fair waiting room for nginx.
//!
//! This file only registers the module with nginx: its directives, its configuration
//! callbacks, the phase handlers, the header filter and the per-worker start and exit hooks.
//! The work is done in layers, each using only the ones above it in this list
//! (`scripts/check-layout` fails on an import cycle):
//!
//! - `clock`, `log`, `request`, `inflight`, `shared_zone`: the module's time, throttled error
//!   lines, the one boundary with nginx's request (a safe `Request`), suspended calls, and
//!   one shared-memory zone declaration (leaves);
//! - `net`: a peer connection and TLS on nginx's event loop;
//! - `redis`: the Redis client (connection, TLS step, Sentinel, Cluster) on `net`;
//! - `sync`: the one sync driver of the zones that meet the fleet once an interval (per-worker
//!   timer, leader election, one call in flight, fencing, failure policy, resign);
//! - `store`: a room's state in shared memory, central Redis or a synced fleet, one decision
//!   API (the shells of the core's `room`, `redis` and `fleet`);
//! - `cookie`, `ctx`: the ticket cookie in and out; the typed per-request context, kept
//!   across internal redirects;
//! - `rate`, `vars`: a fleet-wide request rate (its zone, preaccess handler and interval
//!   sync; the shell of the core's `rate`); `$smart_limit_*`;
//! - `conf`: directives and the main, location and zone configurations;
//! - `answer`, `filter`: the waiting answer (HTML, JSON); the `X-Smart-Limit` header filter;
//! - `endpoint`: the `smart_limit_metrics` / `smart_limit_control` / `smart_limit_poll` /
//!   `smart_limit_jwks` locations;
//! - `handler`: the preaccess handler (request -> ticket -> decision -> answer).
//!
//! The rules themselves are in the `smart_limit_core` crate, which has no nginx symbols.

#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

use core::ptr::addr_of;
use std::panic::{catch_unwind, AssertUnwindSafe};

use ngx::ffi::{
    ngx_command_t, ngx_conf_t, ngx_cycle_t, ngx_http_module_t, ngx_int_t, ngx_module_t, ngx_uint_t,
    NGX_CONF_1MORE, NGX_CONF_2MORE, NGX_CONF_NOARGS, NGX_CONF_TAKE1, NGX_HTTP_LOC_CONF,
    NGX_HTTP_LOC_CONF_OFFSET, NGX_HTTP_MAIN_CONF, NGX_HTTP_MAIN_CONF_OFFSET, NGX_HTTP_MODULE,
    NGX_HTTP_SRV_CONF,
};
use ngx::http::{HttpModule, HttpModuleLocationConf, HttpModuleMainConf};
use ngx::{core::Status, ngx_string};

mod answer;
mod challenge;
mod clock;
mod conf;
mod cookie;
mod ctx;
mod endpoint;
mod filter;
mod handler;
mod inflight;
mod log;
mod net;
mod rate;
mod redis;
mod request;
mod shared_zone;
mod steer;
mod store;
mod sync;
mod token;
mod vars;
mod version;

pub struct Module;

impl HttpModule for Module {
    fn module() -> &'static ngx_module_t {
        // SAFETY: nginx writes the module static (its index) only while loading the
        // configuration, in the master, before any reader runs.
        unsafe { &*addr_of!(ngx_http_smart_limit_module) }
    }

    unsafe extern "C" fn preconfiguration(cf: *mut ngx_conf_t) -> ngx_int_t {
        // SAFETY: nginx passes the configuration being parsed.
        vars::register(unsafe { &mut *cf }).into()
    }

    unsafe extern "C" fn postconfiguration(cf: *mut ngx_conf_t) -> ngx_int_t {
        // SAFETY: nginx passes the configuration being parsed.
        let cf = unsafe { &mut *cf };
        // The rate's handler goes in after the room's, so it runs before it.
        if handler::install(cf).is_err()
            || rate::handler::install(cf).is_err()
            || steer::install(cf).is_err()
        {
            return Status::NGX_ERROR.into();
        }
        filter::install();
        Status::NGX_OK.into()
    }
}

// SAFETY: MainConf is what create_main_conf allocates for this module's main_conf slot.
unsafe impl HttpModuleMainConf for Module {
    type MainConf = conf::MainConf;
}

// SAFETY: LocConf is what create_loc_conf allocates for this module's loc_conf slot.
unsafe impl HttpModuleLocationConf for Module {
    type LocationConf = conf::LocConf;
}

/// The master has read a configuration (at start-up, and on every reload): the clock is
/// anchored (once), and one line names the module's version, as `nginx -V` names nginx's.
unsafe extern "C" fn init_module(cycle: *mut ngx_cycle_t) -> ngx_int_t {
    // The module's clock is anchored here, in the master, for every process it forks.
    clock::anchor();
    // SAFETY: nginx passes the cycle it has just initialised; its log is open.
    if let Some(log) = unsafe { cycle.as_ref() }.map(|c| c.log) {
        if !log.is_null() {
            ngx::ngx_log_error!(
                ngx::ffi::NGX_LOG_NOTICE,
                log,
                "smart_limit/{} (built for nginx/{})",
                version::MODULE,
                version::nginx()
            );
        }
    }
    Status::NGX_OK.into()
}

/// Every process nginx forks starts here: per-process state is reset, and in a worker (or the
/// single process of `master_process off`) the interval timers of the fleet rate zones and of
/// the synced rooms start. nginx calls this in the cache manager and cache loader too: they
/// start nothing, so they never lead a node's syncs nor connect to Redis
/// ([`sync::ticker::in_worker`]).
unsafe extern "C" fn init_process(cycle: *mut ngx_cycle_t) -> ngx_int_t {
    smart_limit_core::util::random::after_fork();
    if !sync::ticker::in_worker() {
        return Status::NGX_OK.into();
    }
    if let Some(main) = conf::MainConf::of_cycle(cycle) {
        let _ = catch_unwind(AssertUnwindSafe(|| {
            main.rate_zones().for_each(sync::start_worker)
        }));
        let _ = catch_unwind(AssertUnwindSafe(|| {
            main.zones().for_each(sync::start_worker)
        }));
    }
    Status::NGX_OK.into()
}

/// A worker exits: it stops syncing for the fleet rate zones and synced rooms it led. (A
/// helper started nothing, so it has nothing to stop or resign.)
unsafe extern "C" fn exit_process(cycle: *mut ngx_cycle_t) {
    if !sync::ticker::in_worker() {
        return;
    }
    if let Some(main) = conf::MainConf::of_cycle(cycle) {
        let _ = catch_unwind(AssertUnwindSafe(|| {
            main.rate_zones().for_each(sync::stop_worker)
        }));
        let _ = catch_unwind(AssertUnwindSafe(|| {
            main.zones().for_each(sync::stop_worker)
        }));
    }
}

const ANY_LEVEL: u32 = NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF;

const fn command(
    name: ngx::ffi::ngx_str_t,
    type_: u32,
    set: conf::Setter,
    conf: usize,
) -> ngx_command_t {
    ngx_command_t {
        name,
        type_: type_ as ngx_uint_t,
        set: Some(set),
        conf,
        offset: 0,
        post: core::ptr::null_mut(),
    }
}

static mut COMMANDS: [ngx_command_t; 19] = [
    command(
        ngx_string!("smart_limit_zone"),
        NGX_HTTP_MAIN_CONF | NGX_CONF_1MORE,
        conf::zone::set_zone,
        NGX_HTTP_MAIN_CONF_OFFSET,
    ),
    command(
        ngx_string!("smart_limit_secret"),
        NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1,
        conf::zone::set_secret,
        NGX_HTTP_MAIN_CONF_OFFSET,
    ),
    command(
        ngx_string!("smart_limit_token_key"),
        NGX_HTTP_MAIN_CONF | NGX_CONF_1MORE,
        conf::token::set_token_key,
        NGX_HTTP_MAIN_CONF_OFFSET,
    ),
    command(
        ngx_string!("smart_limit_event"),
        NGX_HTTP_MAIN_CONF | NGX_CONF_2MORE,
        conf::event::set_event,
        NGX_HTTP_MAIN_CONF_OFFSET,
    ),
    command(
        ngx_string!("smart_limit"),
        ANY_LEVEL | NGX_CONF_TAKE1,
        conf::location::set_room,
        NGX_HTTP_LOC_CONF_OFFSET,
    ),
    command(
        ngx_string!("smart_limit_documents"),
        ANY_LEVEL | NGX_CONF_TAKE1,
        conf::location::set_documents,
        NGX_HTTP_LOC_CONF_OFFSET,
    ),
    command(
        ngx_string!("smart_limit_status"),
        ANY_LEVEL | NGX_CONF_TAKE1,
        conf::location::set_status,
        NGX_HTTP_LOC_CONF_OFFSET,
    ),
    command(
        ngx_string!("smart_limit_refresh"),
        ANY_LEVEL | NGX_CONF_TAKE1,
        conf::location::set_refresh,
        NGX_HTTP_LOC_CONF_OFFSET,
    ),
    command(
        ngx_string!("smart_limit_bypass"),
        ANY_LEVEL | NGX_CONF_TAKE1,
        conf::location::set_bypass,
        NGX_HTTP_LOC_CONF_OFFSET,
    ),
    command(
        ngx_string!("smart_limit_page"),
        ANY_LEVEL | NGX_CONF_TAKE1,
        conf::location::set_page,
        NGX_HTTP_LOC_CONF_OFFSET,
    ),
    command(
        ngx_string!("smart_limit_dry_run"),
        ANY_LEVEL | NGX_CONF_TAKE1,
        conf::location::set_dry_run,
        NGX_HTTP_LOC_CONF_OFFSET,
    ),
    command(
        ngx_string!("smart_limit_metrics"),
        NGX_HTTP_LOC_CONF | NGX_CONF_NOARGS,
        endpoint::metrics::set_metrics,
        NGX_HTTP_LOC_CONF_OFFSET,
    ),
    command(
        ngx_string!("smart_limit_poll"),
        NGX_HTTP_LOC_CONF | NGX_CONF_NOARGS,
        endpoint::poll::set_poll,
        NGX_HTTP_LOC_CONF_OFFSET,
    ),
    command(
        ngx_string!("smart_limit_control"),
        NGX_HTTP_LOC_CONF | NGX_CONF_NOARGS,
        endpoint::control::set_control,
        NGX_HTTP_LOC_CONF_OFFSET,
    ),
    command(
        ngx_string!("smart_limit_jwks"),
        NGX_HTTP_LOC_CONF | NGX_CONF_NOARGS,
        endpoint::jwks::set_jwks,
        NGX_HTTP_LOC_CONF_OFFSET,
    ),
    command(
        ngx_string!("smart_limit_rate_zone"),
        NGX_HTTP_MAIN_CONF | NGX_CONF_1MORE,
        conf::rate::set_rate_zone,
        NGX_HTTP_MAIN_CONF_OFFSET,
    ),
    command(
        ngx_string!("smart_limit_rate"),
        ANY_LEVEL | NGX_CONF_TAKE1,
        conf::rate::set_rate,
        NGX_HTTP_LOC_CONF_OFFSET,
    ),
    command(
        ngx_string!("smart_limit_rate_status"),
        ANY_LEVEL | NGX_CONF_TAKE1,
        conf::rate::set_rate_status,
        NGX_HTTP_LOC_CONF_OFFSET,
    ),
    ngx_command_t::empty(),
];

static MODULE_CTX: ngx_http_module_t = ngx_http_module_t {
    preconfiguration: Some(Module::preconfiguration),
    postconfiguration: Some(Module::postconfiguration),
    create_main_conf: Some(Module::create_main_conf),
    init_main_conf: Some(conf::init_main_conf),
    create_srv_conf: None,
    merge_srv_conf: None,
    create_loc_conf: Some(Module::create_loc_conf),
    merge_loc_conf: Some(conf::merge_loc_conf),
};

ngx::ngx_modules!(ngx_http_smart_limit_module);

#[used]
#[allow(non_upper_case_globals)]
pub static mut ngx_http_smart_limit_module: ngx_module_t = ngx_module_t {
    ctx: addr_of!(MODULE_CTX) as _,
    // SAFETY: nginx reads the table; nothing else writes it.
    commands: unsafe { &raw mut COMMANDS[0] },
    type_: NGX_HTTP_MODULE as _,
    init_module: Some(init_module),
    init_process: Some(init_process),
    exit_process: Some(exit_process),
    ..ngx_module_t::default()
};
