//! The room and the waiting answer of a location (http, server, location levels):
//! `smart_limit NAME | off`, `smart_limit_documents NAME | off`, `smart_limit_status`,
//! `smart_limit_refresh`, `smart_limit_bypass`, `smart_limit_page`, `smart_limit_dry_run`.

use std::rc::Rc;

use ngx::ffi::ngx_conf_t;
use smart_limit_core::config as parse;
use smart_limit_core::page::{check_template, Template};

use super::directive::{complex_value, file_arg, first_arg, refuse, setter, Refused};
use super::{DryRun, LocConf, RoomRef};

setter!(set_room, LocConf, room);
setter!(set_documents, LocConf, documents);
setter!(set_status, LocConf, status);
setter!(set_refresh, LocConf, refresh);
setter!(set_bypass, LocConf, bypass);
setter!(set_page, LocConf, page);
setter!(set_dry_run, LocConf, dry_run);

/// `smart_limit NAME | off`
fn room(cf: &mut ngx_conf_t, lcf: &mut LocConf) -> Result<(), Refused> {
    if lcf.room != RoomRef::Unset || lcf.room_name.is_some() {
        return Err(refuse(cf, "is duplicate"));
    }
    match first_arg(cf)?.as_str() {
        "off" => lcf.room = RoomRef::Off,
        "" => return Err(refuse(cf, "needs a zone name or \"off\"")),
        name => lcf.room_name = Some(name.to_string()),
    }
    Ok(())
}

/// `smart_limit_documents NAME | off`: in a location with `limit_req` in front of a room,
/// the room decides page views at their document ([S29]).
fn documents(cf: &mut ngx_conf_t, lcf: &mut LocConf) -> Result<(), Refused> {
    if lcf.documents != RoomRef::Unset || lcf.documents_name.is_some() {
        return Err(refuse(cf, "is duplicate"));
    }
    match first_arg(cf)?.as_str() {
        "off" => lcf.documents = RoomRef::Off,
        "" => return Err(refuse(cf, "needs a zone name or \"off\"")),
        name => lcf.documents_name = Some(name.to_string()),
    }
    Ok(())
}

/// `smart_limit_status 200|202|429|503`
fn status(cf: &mut ngx_conf_t, lcf: &mut LocConf) -> Result<(), Refused> {
    if lcf.status.is_some() {
        return Err(refuse(cf, "is duplicate"));
    }
    let value = first_arg(cf)?;
    let code = parse::parse_status(&value)
        .map_err(|e| refuse(cf, format_args!("invalid value \"{value}\": {e}")))?;
    lcf.status = Some(code);
    Ok(())
}

/// `smart_limit_refresh TIME`: how often the waiting page reloads itself (and `Retry-After`).
fn refresh(cf: &mut ngx_conf_t, lcf: &mut LocConf) -> Result<(), Refused> {
    if lcf.refresh_secs.is_some() {
        return Err(refuse(cf, "is duplicate"));
    }
    let value = first_arg(cf)?;
    match parse::parse_time_ms(&value) {
        Ok(ms) if (1000..=3_600_000).contains(&ms) => {
            lcf.refresh_secs = Some(ms / 1000);
            Ok(())
        }
        Ok(_) => Err(refuse(
            cf,
            format_args!("invalid value \"{value}\": must be between 1s and 1h"),
        )),
        Err(e) => Err(refuse(cf, format_args!("invalid value \"{value}\": {e}"))),
    }
}

/// `smart_limit_bypass VALUE` (variables allowed).
fn bypass(cf: &mut ngx_conf_t, lcf: &mut LocConf) -> Result<(), Refused> {
    if !lcf.bypass.is_null() {
        return Err(refuse(cf, "is duplicate"));
    }
    lcf.bypass = complex_value(cf)?;
    Ok(())
}

/// `smart_limit_dry_run on | off | VALUE`: a value with variables turns dry run on per
/// request when it is non-empty and not "0" or "off" (e.g. from `map` or `geo`).
fn dry_run(cf: &mut ngx_conf_t, lcf: &mut LocConf) -> Result<(), Refused> {
    if lcf.dry_run != DryRun::Unset {
        return Err(refuse(cf, "is duplicate"));
    }
    let value = first_arg(cf)?;
    lcf.dry_run = match value.as_str() {
        "on" => DryRun::On,
        "off" => DryRun::Off,
        v if v.contains('$') => DryRun::Var(complex_value(cf)?),
        v => {
            return Err(refuse(
                cf,
                format_args!(
                    "invalid value \"{}\": expected on, off, or a value with variables",
                    v.escape_default()
                ),
            ))
        }
    };
    Ok(())
}

/// `smart_limit_page FILE`: a template for the waiting page, read and prepared once, at
/// configuration time.
fn page(cf: &mut ngx_conf_t, lcf: &mut LocConf) -> Result<(), Refused> {
    if lcf.page.is_some() {
        return Err(refuse(cf, "is duplicate"));
    }
    let (path, text) = file_arg(cf)?;
    check_template(&text).map_err(|e| refuse(cf, format_args!("\"{path}\": {e}")))?;
    lcf.page = Some(Rc::new(Template::compile(&text)));
    Ok(())
}
