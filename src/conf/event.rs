//! `smart_limit_event NAME room=ROOM start=T [prequeue=T] [end=T] ...` (http level): a room's
//! scheduled event ([S18]). The arguments are read here; the checks that need every room and
//! every event (unknown room, a name used twice, overlapping events) run once the http block
//! is read (`check`).

use ngx::ffi::{ngx_conf_t, NGX_LOG_EMERG};
use ngx::ngx_conf_log_error;
use std::rc::Rc;

use smart_limit_core::event::{check_events, parse_event, EventSpec};

use super::directive::{self, refuse, setter, Refused};
use super::MainConf;
use crate::store::event::{read_page, ZoneEvents};
use crate::store::Zone;

setter!(set_event, MainConf, event);

/// `smart_limit_event NAME room=ROOM start=T ...`
fn event(cf: &mut ngx_conf_t, mcf: &mut MainConf) -> Result<(), Refused> {
    let args = directive::args(cf)?;
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut spec = parse_event(&words).map_err(|e| refuse(cf, e))?;
    let page = match spec.page.take() {
        None => None,
        Some(path) => {
            // Relative to nginx's prefix, as other files of the configuration.
            let path = directive::full_name(cf, &path)?;
            let page = read_page(&path)
                .map_err(|e| refuse(cf, format_args!("event \"{}\": page= {e}", spec.name)))?;
            spec.page = Some(path);
            Some(Rc::new(page))
        }
    };
    mcf.events.push((spec, page));
    Ok(())
}

/// Once the http block is read: the events' rooms exist, no name is used twice, no two
/// events of a room overlap; each room gets its events.
pub fn check(cf: &mut ngx_conf_t, mcf: &mut MainConf) -> Result<(), Refused> {
    let specs: Vec<EventSpec> = mcf.events.iter().map(|(s, _)| s.clone()).collect();
    if let Err(e) = check_events(&specs, |room| mcf.zone(room).is_some()) {
        ngx_conf_log_error!(NGX_LOG_EMERG, cf, "\"smart_limit_event\" {}", e);
        return Err(Refused);
    }
    let events = &mcf.events;
    for z in mcf.zones.iter_mut() {
        // SAFETY: zones live in the cycle pool; configuration is single-threaded and nothing
        // else holds a reference to the zone while the http block is finished.
        let zone = unsafe { z.as_mut() };
        let mine = events
            .iter()
            .filter(|(e, _)| e.room == zone.params.name)
            .cloned()
            .collect();
        zone.events = ZoneEvents::new(mine, Zone::events_key(&zone.params));
    }
    Ok(())
}
