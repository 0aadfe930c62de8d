//! The fleet rate's directives: `smart_limit_rate_zone NAME rate=... [redis=...]` (http),
//! `smart_limit_rate NAME | off` and `smart_limit_rate_status CODE` (http, server, location).

use ngx::ffi::{ngx_conf_t, NGX_LOG_EMERG};
use ngx::ngx_conf_log_error;
use smart_limit_core::rate::RateZoneParams;

use super::directive::{self, first_arg, refuse, setter, Refused};
use super::{LocConf, MainConf, RoomRef};

setter!(set_rate_zone, MainConf, rate_zone);
setter!(set_rate, LocConf, rate);
setter!(set_rate_status, LocConf, rate_status);

/// `smart_limit_rate_zone NAME rate=RATE [redis=HOST:PORT] [interval=] [timeout=] ...`
fn rate_zone(cf: &mut ngx_conf_t, mcf: &mut MainConf) -> Result<(), Refused> {
    let args = directive::args(cf)?;
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    let params = RateZoneParams::parse(&words).map_err(|e| refuse(cf, e))?;
    if mcf.rate_zones().any(|z| z.params.name == params.name) {
        return Err(refuse(
            cf,
            format_args!("zone \"{}\" is already declared", params.name),
        ));
    }
    let zone = crate::rate::add_zone(cf, params).map_err(|e| refuse(cf, e))?;
    mcf.rate_zones.push(zone);
    Ok(())
}

/// `smart_limit_rate NAME | off`
fn rate(cf: &mut ngx_conf_t, lcf: &mut LocConf) -> Result<(), Refused> {
    if lcf.rate != RoomRef::Unset || lcf.rate_name.is_some() {
        return Err(refuse(cf, "is duplicate"));
    }
    match first_arg(cf)?.as_str() {
        "off" => lcf.rate = RoomRef::Off,
        "" => return Err(refuse(cf, "needs a zone name or \"off\"")),
        name => lcf.rate_name = Some(name.to_string()),
    }
    Ok(())
}

/// `smart_limit_rate_status CODE`: 400-599, like `limit_req_status` (a code `error_page`
/// can catch, e.g. 512 for the waiting room).
fn rate_status(cf: &mut ngx_conf_t, lcf: &mut LocConf) -> Result<(), Refused> {
    if lcf.rate_status.is_some() {
        return Err(refuse(cf, "is duplicate"));
    }
    let value = first_arg(cf)?;
    match value.parse::<u16>() {
        Ok(code @ 400..=599) if value.bytes().all(|b| b.is_ascii_digit()) => {
            lcf.rate_status = Some(code);
            Ok(())
        }
        _ => Err(refuse(
            cf,
            format_args!(
                "invalid value \"{}\": expected a status code between 400 and 599",
                value.escape_default()
            ),
        )),
    }
}

/// Turns the name given to `smart_limit_rate` into its zone's index.
pub fn resolve(cf: &mut ngx_conf_t, mcf: &MainConf, conf: &mut LocConf) -> Result<(), Refused> {
    let Some(name) = conf.rate_name.take() else {
        return Ok(());
    };
    match mcf.rate_zones().position(|z| z.params.name == name) {
        Some(i) => {
            conf.rate = RoomRef::Named(i);
            Ok(())
        }
        None => {
            ngx_conf_log_error!(
                NGX_LOG_EMERG,
                cf,
                "\"smart_limit_rate\" names unknown zone \"{}\": declare it with \
                 smart_limit_rate_zone",
                name
            );
            Err(Refused)
        }
    }
}
