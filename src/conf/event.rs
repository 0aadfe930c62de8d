//! `smart_limit_event NAME room=ROOM start=T [prequeue=T] [end=T] ...` (http level): a room's
//! scheduled event ([S18]). The arguments are read here; the checks that need every room and
//! every event (unknown room, a name used twice, overlapping events) run once the http block
//! is read (`check`).

use ngx::ffi::{ngx_conf_t, NGX_LOG_EMERG};
use ngx::ngx_conf_log_error;
use smart_limit_core::event::{check_events, parse_event};

use super::directive::{self, refuse, setter, Refused};
use super::MainConf;
use crate::store::event::ZoneEvent;

setter!(set_event, MainConf, event);

/// `smart_limit_event NAME room=ROOM start=T ...`
fn event(cf: &mut ngx_conf_t, mcf: &mut MainConf) -> Result<(), Refused> {
    let args = directive::args(cf)?;
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    let spec = parse_event(&words).map_err(|e| refuse(cf, e))?;
    if spec.page.is_some() {
        return Err(refuse(
            cf,
            format_args!(
                "event \"{}\": page= is not supported yet; use smart_limit_page in the \
                 room's locations",
                spec.name
            ),
        ));
    }
    mcf.events.push(spec);
    Ok(())
}

/// Once the http block is read: the events' rooms exist, no name is used twice, no two
/// events of a room overlap; each room gets its events.
pub fn check(cf: &mut ngx_conf_t, mcf: &mut MainConf) -> Result<(), Refused> {
    if let Err(e) = check_events(&mcf.events, |room| mcf.zone(room).is_some()) {
        ngx_conf_log_error!(NGX_LOG_EMERG, cf, "\"smart_limit_event\" {}", e);
        return Err(Refused);
    }
    let events = &mcf.events;
    for z in mcf.zones.iter_mut() {
        // SAFETY: zones live in the cycle pool; configuration is single-threaded and nothing
        // else holds a reference to the zone while the http block is finished.
        let zone = unsafe { z.as_mut() };
        zone.events = events
            .iter()
            .filter(|e| e.room == zone.params.name)
            .cloned()
            .map(ZoneEvent::new)
            .collect();
    }
    Ok(())
}
