//! Redis Cluster: a command follows `MOVED` (the slot's node from now on) and `ASK` (this
//! command only, behind `ASKING`), and is retried on `TRYAGAIN` while a slot migrates.

use core::task::Waker;
use std::time::Duration;

use ngx::ffi::NGX_LOG_NOTICE;
use ngx::ngx_log_error;
use smart_limit_core::redis::resp::Value;
use smart_limit_core::redis::{self};

use crate::clock::now_ms;
use crate::net::peer::Addr;

use super::*;

impl Client {
    /// Sends `cmd` and resolves with its reply, following a cluster's redirections (`MOVED`,
    /// `ASK`, a few at most) and retrying while the room's slot is half-migrated (`TRYAGAIN`,
    /// every few ms within the timeout); an error within the timeout otherwise. A slot that
    /// keeps moving for longer is [`ClientError::Migrating`]: the caller's policy decides,
    /// but the connection is not blamed (no reconnect delay).
    pub async fn request(&self, cmd: Vec<u8>) -> Result<Value, ClientError> {
        let started = now_ms();
        let mut asking = false;
        let mut redirects = 0;
        loop {
            let reply = self.send(&cmd, asking).await;
            asking = false;
            let in_time = now_ms().saturating_sub(started) < self.cfg.timeout_ms;
            match &reply {
                Ok(Value::Error(e)) => {
                    let moved = redis::redirection(e, b"MOVED ").map(|a| (a, true));
                    let ask = || redis::redirection(e, b"ASK ").map(|a| (a, false));
                    if let Some((addr, permanent)) = moved.or_else(ask) {
                        redirects += 1;
                        if redirects > MAX_REDIRECTS || !in_time {
                            return Err(ClientError::Migrating);
                        }
                        self.redirect(Addr::from_socket(addr), permanent);
                        asking = !permanent;
                    } else if e.starts_with(b"TRYAGAIN") {
                        if !in_time {
                            return Err(ClientError::Migrating);
                        }
                        ngx::async_::sleep(Duration::from_millis(TRYAGAIN_MS)).await;
                    } else {
                        return reply;
                    }
                }
                Err(ClientError::Redirected) => {
                    redirects += 1;
                    if redirects > MAX_REDIRECTS || !in_time {
                        return Err(ClientError::Migrating);
                    }
                }
                _ => return reply,
            }
        }
    }

    /// A cluster redirection: the room's slot is on `addr` (`MOVED`: from now on; `ASK`: for
    /// the command about to be sent again). The connection moves there; the commands in flight
    /// on the old one are sent again by their callers.
    pub(super) fn redirect(&self, addr: Addr, moved: bool) {
        let mut wake = Vec::new();
        if let Ok(mut st) = self.st.try_borrow_mut() {
            if moved && !st.slot_node.as_ref().is_some_and(|t| t.same(&addr)) {
                st.slot_node = Some(addr.clone());
                let log = crate::log::cycle_log();
                if !log.is_null() {
                    ngx_log_error!(
                        NGX_LOG_NOTICE,
                        log,
                        "{}: the room's slot is served by {} (cluster MOVED)",
                        self.cfg.label,
                        addr.text()
                    );
                }
            }
            let here = st.connected_to.as_ref().is_some_and(|a| a.same(&addr));
            if !(here && st.phase != Phase::Closed) {
                self.close(&mut st);
                Self::fail_waiters(&mut st, &ClientError::Redirected, &mut wake);
                st.target = Some(addr);
            }
        }
        wake.into_iter().for_each(Waker::wake);
    }
}
