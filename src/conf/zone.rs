//! `smart_limit_zone NAME [param=value ...]` and `smart_limit_secret FILE` (http level).

use ngx::ffi::ngx_conf_t;
use smart_limit_core::ticket::Keyring;
use smart_limit_core::zone::{AdmitMode, ZoneParams};

use smart_limit_core::token::InviteKey;

use super::directive::{self, file_arg, read_file, refuse, setter, Refused};
use super::MainConf;

setter!(set_zone, MainConf, zone);
setter!(set_secret, MainConf, secret);

/// `smart_limit_zone NAME [size=] [store=] ...`
fn zone(cf: &mut ngx_conf_t, mcf: &mut MainConf) -> Result<(), Refused> {
    let args = directive::args(cf)?;
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut params = ZoneParams::parse(&words).map_err(|e| refuse(cf, e))?;
    // With `session=` an admitted user stays active until the session ends after their last
    // request (Cloudflare's session duration): unless `active_window=` says otherwise, count
    // a session as active for exactly that long, so `max_active` counts every ticket that
    // still admits and no more.
    if let AdmitMode::Session(ms) = params.admit {
        if !words.iter().any(|a| a.starts_with("active_window=")) {
            params.active_window_ms = ms;
        }
    }
    if mcf.zone(&params.name).is_some() {
        return Err(refuse(
            cf,
            format_args!("zone \"{}\" is already declared", params.name),
        ));
    }
    let invite = match params.invite.as_deref() {
        Some(file) => Some(invite_key(cf, file)?),
        None => None,
    };
    let flood_key = params.flood_key.clone();
    let one_place_per = params.one_place_per.clone();
    let mut zone = crate::store::add_zone(cf, params).map_err(|e| refuse(cf, e))?;
    // SAFETY: the zone was just allocated in the configuration's pool; nothing else refers
    // to it while the directive is read.
    let z = unsafe { zone.as_mut() };
    z.invite = invite;
    for (text, slot) in [(flood_key, &z.flood_key), (one_place_per, &z.one_place_per)] {
        if let Some(text) = text {
            slot.set(directive::complex_value_of(cf, &text)?);
        }
    }
    mcf.zones.push(zone);
    Ok(())
}

/// `invite=FILE`: the key the operator's backend signs enqueue tokens with.
fn invite_key(cf: &mut ngx_conf_t, file: &str) -> Result<InviteKey, Refused> {
    let (path, bytes) = read_file(cf, file, "invite=: ")?;
    InviteKey::parse(&bytes).map_err(|e| refuse(cf, format_args!("invite=\"{path}\": {e}")))
}

/// `smart_limit_secret FILE`: the ticket keys.
fn secret(cf: &mut ngx_conf_t, mcf: &mut MainConf) -> Result<(), Refused> {
    if mcf.keys.is_some() {
        return Err(refuse(cf, "is duplicate"));
    }
    let (path, text) = file_arg(cf)?;
    let keys = Keyring::parse(&text).map_err(|e| refuse(cf, format_args!("\"{path}\": {e}")))?;
    mcf.keys = Some(keys);
    Ok(())
}
