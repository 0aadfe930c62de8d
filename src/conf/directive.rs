//! What every directive setter shares: the `extern "C"` entry nginx calls (panic-guarded, so a
//! bug refuses the configuration instead of aborting `nginx -t` or the master on reload), the
//! directive's arguments as strings, and refusals that name the directive and the value.

use core::ffi::{c_char, c_void};
use core::panic::AssertUnwindSafe;

use ngx::core::{Pool, Status, NGX_CONF_ERROR, NGX_CONF_OK};
use ngx::ffi::{
    ngx_command_t, ngx_conf_full_name, ngx_conf_t, ngx_http_compile_complex_value,
    ngx_http_compile_complex_value_t, ngx_http_complex_value_t, ngx_http_request_t, ngx_int_t,
    ngx_str_t, NGX_LOG_EMERG,
};
use ngx::http::{HttpModuleLocationConf, NgxHttpCoreModule};
use ngx::ngx_conf_log_error;

/// The C signature of a directive setter.
pub type Setter =
    unsafe extern "C" fn(*mut ngx_conf_t, *mut ngx_command_t, *mut c_void) -> *mut c_char;

/// A directive was refused; the reason is already in the log.
#[derive(Debug)]
pub struct Refused;

/// Declares the `extern "C"` setter `$name` for directive body `$body`, a function
/// `fn(&mut ngx_conf_t, &mut $conf) -> Result<(), Refused>` where `$conf` is the
/// configuration struct the directive's `conf` offset selects.
macro_rules! setter {
    ($name:ident, $conf:ty, $body:path) => {
        pub unsafe extern "C" fn $name(
            cf: *mut ngx::ffi::ngx_conf_t,
            _cmd: *mut ngx::ffi::ngx_command_t,
            conf: *mut core::ffi::c_void,
        ) -> *mut core::ffi::c_char {
            $crate::conf::directive::run(cf, |cf| {
                // SAFETY: nginx passes the configuration struct this directive's table entry
                // selects, which this module's create_*_conf allocated as `$conf`.
                let conf = unsafe { conf.cast::<$conf>().as_mut() }
                    .ok_or($crate::conf::directive::Refused)?;
                $body(cf, conf)
            })
        }
    };
}
pub(crate) use setter;

/// Runs a configuration callback on the configuration being parsed; a panic refuses it.
pub fn run(
    cf: *mut ngx_conf_t,
    f: impl FnOnce(&mut ngx_conf_t) -> Result<(), Refused>,
) -> *mut c_char {
    // SAFETY: nginx passes the configuration being parsed (or null, refused).
    let Some(conf) = (unsafe { cf.as_mut() }) else {
        return NGX_CONF_ERROR;
    };
    match std::panic::catch_unwind(AssertUnwindSafe(|| f(conf))) {
        Ok(Ok(())) => NGX_CONF_OK,
        Ok(Err(Refused)) => NGX_CONF_ERROR,
        Err(_) => {
            ngx_conf_log_error!(
                NGX_LOG_EMERG,
                cf,
                "smart_limit: internal error while reading the configuration"
            );
            NGX_CONF_ERROR
        }
    }
}

fn raw_args(cf: &ngx_conf_t) -> &[ngx_str_t] {
    // SAFETY: while a directive is parsed, `args` is nginx's array of its words (ngx_str_t).
    unsafe { cf.args.as_ref().map(|a| a.as_slice::<ngx_str_t>()) }.unwrap_or_default()
}

/// The directive's name, for messages.
pub fn name(cf: &ngx_conf_t) -> &str {
    raw_args(cf)
        .first()
        .and_then(|a| a.to_str().ok())
        .unwrap_or("?")
}

/// Logs `"directive" message` at emerg level (what `nginx -t` prints) and refuses.
pub fn refuse(cf: &mut ngx_conf_t, msg: impl core::fmt::Display) -> Refused {
    let directive = name(cf).to_string();
    ngx_conf_log_error!(NGX_LOG_EMERG, cf, "\"{}\" {}", directive, msg);
    Refused
}

/// The directive's arguments after its name, as UTF-8 strings.
pub fn args(cf: &mut ngx_conf_t) -> Result<Vec<String>, Refused> {
    let mut out = Vec::new();
    for a in raw_args(cf).iter().skip(1) {
        match a.to_str() {
            Ok(s) => out.push(s.to_string()),
            Err(_) => return Err(refuse(cf, "argument is not valid UTF-8")),
        }
    }
    Ok(out)
}

/// The first argument, or a refusal when there is none.
pub fn first_arg(cf: &mut ngx_conf_t) -> Result<String, Refused> {
    args(cf)?
        .into_iter()
        .next()
        .ok_or_else(|| refuse(cf, "needs a value"))
}

/// A file name as nginx reads it: relative to the configuration prefix.
pub fn full_name(cf: &mut ngx_conf_t, path: &str) -> Result<String, Refused> {
    // SAFETY: the configuration's pool lives as long as the configuration.
    let mut name = unsafe { ngx_str_t::from_bytes(cf.pool, path.as_bytes()) }.ok_or(Refused)?;
    // SAFETY: the cycle being configured; nginx may replace `name`'s data with a pool string.
    if unsafe { ngx_conf_full_name(cf.cycle, &mut name, 1) } != Status::NGX_OK.0 {
        return Err(Refused);
    }
    Ok(name.to_string())
}

/// The first argument as a file name (relative to the configuration prefix, as for other
/// nginx files) and the file's text.
pub fn file_arg(cf: &mut ngx_conf_t) -> Result<(String, String), Refused> {
    let name = raw_args(cf).get(1).ok_or(Refused)?.to_string();
    read_text(cf, &name, "")
}

/// The file `name` names (relative to the configuration prefix): its full name and bytes. A
/// refusal names the file after `what` (a parameter's `"invite=: "`, or nothing).
pub fn read_file(
    cf: &mut ngx_conf_t,
    name: &str,
    what: &str,
) -> Result<(String, Vec<u8>), Refused> {
    let path = full_name(cf, name)?;
    match std::fs::read(&path) {
        Ok(bytes) => Ok((path, bytes)),
        Err(e) => Err(refuse(
            cf,
            format_args!("{what}cannot read \"{path}\": {e}"),
        )),
    }
}

/// [`read_file`] for a text file (UTF-8).
pub fn read_text(cf: &mut ngx_conf_t, name: &str, what: &str) -> Result<(String, String), Refused> {
    let (path, bytes) = read_file(cf, name, what)?;
    match String::from_utf8(bytes) {
        Ok(text) => Ok((path, text)),
        Err(_) => Err(refuse(
            cf,
            format_args!("{what}cannot read \"{path}\": stream did not contain valid UTF-8"),
        )),
    }
}

/// Compiles the first argument as a value that may hold variables.
pub fn complex_value(cf: &mut ngx_conf_t) -> Result<*mut ngx_http_complex_value_t, Refused> {
    let value = *raw_args(cf).get(1).ok_or(Refused)?;
    compile(cf, value)
}

/// Compiles `text` (a directive parameter's value) as a value that may hold variables.
pub fn complex_value_of(
    cf: &mut ngx_conf_t,
    text: &str,
) -> Result<*mut ngx_http_complex_value_t, Refused> {
    // SAFETY: the configuration's pool lives as long as the configuration.
    let value = unsafe { ngx_str_t::from_bytes(cf.pool, text.as_bytes()) }.ok_or(Refused)?;
    compile(cf, value)
}

fn compile(
    cf: &mut ngx_conf_t,
    mut value: ngx_str_t,
) -> Result<*mut ngx_http_complex_value_t, Refused> {
    // SAFETY: the configuration's pool lives as long as the configuration.
    let pool = unsafe { Pool::from_ngx_pool(cf.pool) };
    let cv = pool.calloc_type::<ngx_http_complex_value_t>();
    if cv.is_null() {
        return Err(Refused);
    }
    // SAFETY: an all-zero compile context is its C "unset" value.
    let mut ccv: ngx_http_compile_complex_value_t = unsafe { core::mem::zeroed() };
    ccv.cf = cf;
    ccv.value = &mut value;
    ccv.complex_value = cv;
    // SAFETY: a filled-in compile context for the configuration being parsed; nginx logs
    // its own errors.
    if unsafe { ngx_http_compile_complex_value(&mut ccv) } != Status::NGX_OK.0 {
        return Err(Refused);
    }
    Ok(cv)
}

/// Makes `handler` the location's content handler (as `stub_status` does).
pub fn set_content_handler(
    cf: &mut ngx_conf_t,
    handler: unsafe extern "C" fn(*mut ngx_http_request_t) -> ngx_int_t,
) -> Result<(), Refused> {
    let Some(clcf) = NgxHttpCoreModule::location_conf_mut(cf) else {
        return Err(Refused);
    };
    if clcf.handler.is_some() {
        let directive = name(cf).to_string();
        ngx_conf_log_error!(
            NGX_LOG_EMERG,
            cf,
            "\"{}\": this location already has a content handler (proxy_pass, root with \
             another module, ...)",
            directive
        );
        return Err(Refused);
    }
    clcf.handler = Some(handler);
    Ok(())
}
