//! `smart_limit_poll`: a status endpoint for programs. The module answers every request of
//! such a location itself: waiting and closed answers as usual, and an admitted visitor gets
//! `{"status":"admitted",...}` (or the "it's your turn" page) with its ticket, so a mobile
//! app can poll a light URL and then call the real API with the ticket cookie, or with the
//! answer's admission token as `Authorization: Bearer` (`smart_limit_token_key`, [S28]).

use ngx::ffi::{ngx_conf_t, ngx_int_t};
use ngx::http::Request;
use smart_limit_core::page::{ViewStatus, WaitView};

use crate::answer;
use crate::conf::directive::{refuse, setter, Refused};
use crate::conf::LocConf;
use crate::store::Zone;

setter!(set_poll, LocConf, poll);

fn poll(cf: &mut ngx_conf_t, lcf: &mut LocConf) -> Result<(), Refused> {
    if lcf.poll {
        return Err(refuse(cf, "is duplicate"));
    }
    lcf.poll = true;
    Ok(())
}

/// The "admitted" answer of a poll location.
pub fn admitted_answer(r: &mut Request, lcf: &LocConf, zone: &Zone, now: u64) -> ngx_int_t {
    let token = crate::token::of_request(r);
    let queue_len = zone.snapshot(now).map_or(0, |s| s.queue_len);
    let view = WaitView {
        room: zone.params.name.as_str(),
        status: ViewStatus::Admitted,
        position: None,
        queue_len,
        eta_secs: None,
        refresh_secs: lcf.refresh_secs(),
        updated_at: now / 1000,
        starts_at: None,
        challenge: None,
        token: token.as_deref(),
        resumed: false,
    };
    let event_page = zone.event_now(now).and_then(|(e, _)| e.page.clone());
    answer::waiting(r, lcf, event_page.as_deref(), &view)
}
