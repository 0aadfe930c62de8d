//! smart_limit: a fair waiting room for nginx.
//!
//! This file only registers the module with nginx: its directives, its configuration
//! callbacks, and the access-phase handler. The work is done in:
//! - `conf`: directive parsing and the main, location and zone configurations;
//! - `handler`: request -> ticket -> decision -> answer, re-entrant for asynchronous stores;
//! - `store`: the room's state, in this node's shared memory (and Redis);
//! - `answer`: the waiting page, JSON and headers;
//! - `vars`: `$smart_limit_*` variables;
//! - `filter`: the response header filter for origin commands (`X-Smart-Limit: revoke`);
//! - `metrics`, `control`: the `smart_limit_metrics` and `smart_limit_control` endpoints.
//!
//! The rules themselves are in the `smart_limit_core` crate, which has no nginx symbols.

use core::ptr::addr_of;

use ngx::ffi::{
    ngx_array_push, ngx_command_t, ngx_conf_t, ngx_http_handler_pt, ngx_http_module_t,
    ngx_http_phases_NGX_HTTP_ACCESS_PHASE, ngx_int_t, ngx_module_t, ngx_uint_t, NGX_CONF_1MORE,
    NGX_CONF_NOARGS, NGX_CONF_TAKE1, NGX_HTTP_LOC_CONF, NGX_HTTP_LOC_CONF_OFFSET,
    NGX_HTTP_MAIN_CONF, NGX_HTTP_MAIN_CONF_OFFSET, NGX_HTTP_MODULE, NGX_HTTP_SRV_CONF,
};
use ngx::http::{HttpModule, HttpModuleLocationConf, HttpModuleMainConf, NgxHttpCoreModule};
use ngx::{core::Status, ngx_string};

mod answer;
mod conf;
mod control;
mod filter;
mod handler;
mod inflight;
mod metrics;
mod net;
mod store;
mod vars;

pub struct Module;

impl HttpModule for Module {
    fn module() -> &'static ngx_module_t {
        // SAFETY: the module static is only written by nginx while loading configuration.
        unsafe { &*addr_of!(ngx_http_smart_limit_module) }
    }

    unsafe extern "C" fn preconfiguration(cf: *mut ngx_conf_t) -> ngx_int_t {
        vars::register(cf).into()
    }

    unsafe extern "C" fn postconfiguration(cf: *mut ngx_conf_t) -> ngx_int_t {
        let Some(cmcf) = NgxHttpCoreModule::main_conf_mut(&*cf) else {
            return Status::NGX_ERROR.into();
        };
        let h = ngx_array_push(
            &mut cmcf.phases[ngx_http_phases_NGX_HTTP_ACCESS_PHASE as usize].handlers,
        ) as *mut ngx_http_handler_pt;
        if h.is_null() {
            return Status::NGX_ERROR.into();
        }
        *h = Some(handler::access_handler);
        filter::register();
        Status::NGX_OK.into()
    }
}

unsafe impl HttpModuleMainConf for Module {
    type MainConf = conf::MainConf;
}

unsafe impl HttpModuleLocationConf for Module {
    type LocationConf = conf::LocConf;
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

static mut COMMANDS: [ngx_command_t; 12] = [
    command(
        ngx_string!("smart_limit_zone"),
        NGX_HTTP_MAIN_CONF | NGX_CONF_1MORE,
        conf::set_zone,
        NGX_HTTP_MAIN_CONF_OFFSET,
    ),
    command(
        ngx_string!("smart_limit_secret"),
        NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1,
        conf::set_secret,
        NGX_HTTP_MAIN_CONF_OFFSET,
    ),
    command(
        ngx_string!("smart_limit"),
        ANY_LEVEL | NGX_CONF_TAKE1,
        conf::set_room,
        NGX_HTTP_LOC_CONF_OFFSET,
    ),
    command(
        ngx_string!("smart_limit_status"),
        ANY_LEVEL | NGX_CONF_TAKE1,
        conf::set_status,
        NGX_HTTP_LOC_CONF_OFFSET,
    ),
    command(
        ngx_string!("smart_limit_refresh"),
        ANY_LEVEL | NGX_CONF_TAKE1,
        conf::set_refresh,
        NGX_HTTP_LOC_CONF_OFFSET,
    ),
    command(
        ngx_string!("smart_limit_bypass"),
        ANY_LEVEL | NGX_CONF_TAKE1,
        conf::set_bypass,
        NGX_HTTP_LOC_CONF_OFFSET,
    ),
    command(
        ngx_string!("smart_limit_page"),
        ANY_LEVEL | NGX_CONF_TAKE1,
        conf::set_page,
        NGX_HTTP_LOC_CONF_OFFSET,
    ),
    command(
        ngx_string!("smart_limit_dry_run"),
        ANY_LEVEL | NGX_CONF_TAKE1,
        conf::set_dry_run,
        NGX_HTTP_LOC_CONF_OFFSET,
    ),
    command(
        ngx_string!("smart_limit_metrics"),
        NGX_HTTP_LOC_CONF | NGX_CONF_NOARGS,
        conf::set_metrics,
        NGX_HTTP_LOC_CONF_OFFSET,
    ),
    command(
        ngx_string!("smart_limit_poll"),
        NGX_HTTP_LOC_CONF | NGX_CONF_NOARGS,
        conf::set_poll,
        NGX_HTTP_LOC_CONF_OFFSET,
    ),
    command(
        ngx_string!("smart_limit_control"),
        NGX_HTTP_LOC_CONF | NGX_CONF_NOARGS,
        conf::set_control,
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
    ..ngx_module_t::default()
};

/// The current cycle's log, for messages outside any request (store connections, timers).
pub(crate) fn cycle_log() -> *mut ngx::ffi::ngx_log_t {
    // SAFETY: ngx_cycle is set for the whole life of a worker.
    unsafe {
        let cycle = ngx::ffi::ngx_cycle;
        if cycle.is_null() {
            core::ptr::null_mut()
        } else {
            (*cycle).log
        }
    }
}
