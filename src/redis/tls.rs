//! The TLS step of a new connection: the handshake with nginx's SSL (at once or in the
//! background), then the certificate verified before anything is sent.

use core::panic::AssertUnwindSafe;
use core::task::Waker;
use std::rc::Rc;

use ngx::ffi::ngx_connection_t;

use crate::clock::now_ms;
use crate::net::tls::Handshake;
use crate::net::NetError;

use super::connection::on_event;
use super::*;

impl Client {
    /// The TCP connection is up: TLS first when configured, then the connection's purpose.
    pub(super) fn connected(&self, st: &mut State, now: u64, wake: &mut Vec<Waker>) {
        let Some(tls) = &self.cfg.tls else {
            self.secured(st, now, wake);
            return;
        };
        let host = st
            .connected_to
            .as_ref()
            .map(|a| a.host().to_string())
            .unwrap_or_default();
        let Some(c) = st.peer.connection() else {
            self.fail(st, ClientError::Io(Rc::from("no connection")), now, wake);
            return;
        };
        match tls.start(c, &host, Some(on_tls_done)) {
            Handshake::Done => self.handshaken(st, now, wake),
            Handshake::Again => st.phase = Phase::Handshaking,
            Handshake::Failed(e) => self.fail(st, ClientError::Tls(Rc::from(e)), now, wake),
        }
    }

    /// A TLS handshake ended (at once, or through nginx's SSL handler).
    fn handshaken(&self, st: &mut State, now: u64, wake: &mut Vec<Waker>) {
        st.peer.set_handlers(Some(on_event), Some(on_event));
        let verdict = match (&self.cfg.tls, st.peer.connection()) {
            (Some(tls), Some(c)) => tls.verified(c),
            _ => Err(NetError::NoTls),
        };
        match verdict {
            Ok(()) => self.secured(st, now, wake),
            Err(e) => self.fail(st, ClientError::Tls(Rc::from(e.to_string())), now, wake),
        }
    }

    /// A TLS handshake that went on in the background is over (or timed out).
    fn on_tls_done(&self, timed_out: bool) {
        let mut wake = Vec::new();
        if let Ok(mut st) = self.st.try_borrow_mut() {
            let now = now_ms();
            if st.phase == Phase::Handshaking {
                if timed_out {
                    let e = ClientError::Tls(Rc::from("handshake timed out"));
                    self.fail(&mut st, e, now, &mut wake);
                } else {
                    self.handshaken(&mut st, now, &mut wake);
                }
            }
        }
        wake.into_iter().for_each(Waker::wake);
    }
}

/// nginx's SSL layer: the handshake of the client's connection is over (or timed out).
unsafe extern "C" fn on_tls_done(c: *mut ngx_connection_t) {
    let _ = std::panic::catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: nginx passes the client's connection, whose data is the Client.
        let (timed_out, client) = unsafe {
            let Some(c) = c.as_ref() else { return };
            let Some(client) = c.data.cast::<Client>().as_ref() else {
                return;
            };
            let timed_out = c.read.as_ref().is_some_and(|r| r.timedout() != 0);
            (timed_out, client)
        };
        client.on_tls_done(timed_out);
    }));
}
