//! What callers use: a command queued on the connection (pipelined, one FIFO of waiters),
//! its reply awaited as a future; scripts by SHA; the flush posted once per event loop turn.

use core::cell::{Cell, RefCell, UnsafeCell};
use core::ffi::c_void;
use core::future::Future;
use core::panic::AssertUnwindSafe;
use core::pin::Pin;
use core::task::{Context, Poll, Waker};
use std::collections::VecDeque;
use std::rc::Rc;

use ngx::ffi::{ngx_delete_posted_event, ngx_event_t, ngx_post_event, ngx_posted_events};
use smart_limit_core::redis::resp::Value;
use smart_limit_core::redis::{self, Backoff, Form, BACKOFF_FIRST_MS, BACKOFF_MAX_MS};

use crate::clock::now_ms;
use crate::net::peer::Peer;

use super::*;

impl Client {
    pub fn new(cfg: ClientConfig) -> Client {
        // With Sentinels, a failure is retried soon: the new master may be named any moment.
        let backoff = match cfg.route {
            Route::Sentinel { .. } => Backoff::new(
                BACKOFF_FIRST_MS,
                cfg.timeout_ms
                    .clamp(BACKOFF_FIRST_MS, BACKOFF_MAX_MS)
                    .min(cfg.retry_max_ms),
            ),
            Route::Seeds(_) => Backoff::new(BACKOFF_FIRST_MS, cfg.retry_max_ms),
        };
        Client {
            cfg,
            st: RefCell::new(State {
                peer: Peer::default(),
                phase: Phase::Closed,
                purpose: Purpose::Data,
                connected_to: None,
                target: None,
                slot_node: None,
                seed: 0,
                sentinel: 0,
                sentinels_tried: 0,
                out: Vec::new(),
                sent: 0,
                queued: Vec::new(),
                checking: false,
                version_unknown_told: false,
                inbuf: Vec::new(),
                waiters: VecDeque::new(),
                backoff,
                burst: None,
                last_error: Rc::from(""),
            }),
            // SAFETY: an all-zero ngx_event_t is an idle event; it is set up on first use.
            flush_ev: UnsafeCell::new(unsafe { core::mem::zeroed() }),
            on_shutdown: Cell::new(None),
        }
    }

    /// What to run when this worker's graceful shutdown reaches the connection (once).
    pub fn on_shutdown(&self, hook: ShutdownHook) {
        self.on_shutdown.set(Some(hook));
    }

    /// The worker is shutting down gracefully and the connection was closed for it: the
    /// hook runs once. It must only post work (the client is borrowed here).
    pub(super) fn shutdown_noticed(&self) {
        // SAFETY: a plain global of the worker, read on its only thread.
        if unsafe { ngx::ffi::ngx_exiting } == 0 {
            return;
        }
        if let Some(h) = self.on_shutdown.take() {
            (h.run)(h.owner);
        }
    }

    /// How long a call waits for its reply.
    pub fn timeout_ms(&self) -> u64 {
        self.cfg.timeout_ms
    }

    pub fn label(&self) -> &str {
        &self.cfg.label
    }

    /// What decisions follow while Redis does not answer (for log lines).
    pub fn policy(&self) -> &str {
        &self.cfg.policy
    }

    /// Asks for a flush at the end of this event loop round (once, however many commands).
    fn post_flush(&self) {
        let ev = self.flush_ev.get();
        // SAFETY: the event lives as long as the client, which does not move; single thread.
        unsafe {
            if (*ev).posted() != 0 {
                return;
            }
            (*ev).data = self as *const Client as *mut c_void;
            (*ev).handler = Some(on_flush);
            (*ev).log = crate::log::cycle_log();
            ngx_post_event(ev, &raw mut ngx_posted_events);
        }
    }

    pub(super) fn cancel_flush(&self) {
        let ev = self.flush_ev.get();
        // SAFETY: as above.
        unsafe {
            if (*ev).posted() != 0 {
                ngx_delete_posted_event(ev);
            }
        }
    }

    /// The posted flush: writes what the round's requests queued.
    fn on_flush(&self) {
        let mut wake = Vec::new();
        if let Ok(mut st) = self.st.try_borrow_mut() {
            if st.phase == Phase::Ready {
                if let Err(e) = self.flush(&mut st) {
                    self.fail(&mut st, e, now_ms(), &mut wake);
                }
            }
        }
        wake.into_iter().for_each(Waker::wake);
    }

    /// False while backing off after a failure: a call now would fail at once, so the caller
    /// applies its failure policy without waiting.
    pub fn available(&self, now: u64) -> bool {
        match self.st.try_borrow() {
            Ok(st) => st.phase != Phase::Closed || st.backoff.may_try(now),
            Err(_) => false,
        }
    }

    /// One script call: `EVALSHA` (built by `build(Form::Sha)`), and again with the script's
    /// text (`build(Form::Text)`) when the server lost its script cache since the
    /// connection's `SCRIPT LOAD`.
    pub async fn eval(&self, build: impl Fn(Form) -> Vec<u8>) -> Result<Value, ClientError> {
        let reply = self.request(build(Form::Sha)).await?;
        match &reply {
            Value::Error(e) if e.starts_with(b"NOSCRIPT") => self.request(build(Form::Text)).await,
            _ => Ok(reply),
        }
    }

    /// One command (behind `ASKING` when asked to).
    pub(super) fn send(&self, cmd: &[u8], asking: bool) -> Call {
        let slot = Rc::new(Slot::default());
        let mut wake = Vec::new();
        let res = match self.st.try_borrow_mut() {
            Ok(mut st) => if asking {
                self.submit(&mut st, &redis::asking_command(), Expect::Ignore, &mut wake)
            } else {
                Ok(())
            }
            .and_then(|()| self.submit(&mut st, cmd, Expect::Caller(slot.clone()), &mut wake)),
            Err(_) => Err(ClientError::Io(Rc::from("client busy"))),
        };
        wake.into_iter().for_each(Waker::wake);
        if let Err(e) = res {
            slot.result.set(Some(Err(e)));
        }
        Call { slot }
    }

    fn submit(
        &self,
        st: &mut State,
        cmd: &[u8],
        expect: Expect,
        wake: &mut Vec<Waker>,
    ) -> Result<(), ClientError> {
        let now = now_ms();
        if st.phase == Phase::Closed {
            if !st.backoff.may_try(now) {
                return Err(ClientError::Unavailable(st.last_error.clone()));
            }
            st.sentinels_tried = 0;
            self.open(st, now, wake);
            if st.phase == Phase::Closed {
                return Err(ClientError::Unavailable(st.last_error.clone()));
            }
        }
        st.queued.extend_from_slice(cmd);
        st.waiters.push_back(Waiter {
            expect,
            deadline: now + self.cfg.timeout_ms,
        });
        st.peer.set_idle(false);
        if !st.peer.timer_set() {
            self.arm(st, now);
        }
        if st.phase == Phase::Ready && st.purpose == Purpose::Data {
            self.post_flush();
        }
        Ok(())
    }

    /// The caller found a reply good (the shape it expects): Redis answers again, so a
    /// failure burst ends and the reconnect delay starts over. Only a reply its caller could
    /// use counts: an error reply or one of the wrong shape does not.
    pub fn reply_was_good(&self) {
        if let Ok(mut st) = self.st.try_borrow_mut() {
            self.recovered(&mut st, now_ms());
        }
    }

    /// The caller found a reply it cannot use (wrong shape or type, an error such as a
    /// demoted master's `READONLY`): Redis is not well. The connection is closed and the
    /// reconnect delay grows, as after any failure.
    pub fn reply_was_bad(&self, what: &str) {
        let mut wake = Vec::new();
        if let Ok(mut st) = self.st.try_borrow_mut() {
            st.purpose = Purpose::Data;
            let e = ClientError::Protocol(Rc::from(what));
            self.fail(&mut st, e, now_ms(), &mut wake);
        }
        wake.into_iter().for_each(Waker::wake);
    }
}

/// The client's posted flush event.
unsafe extern "C" fn on_flush(ev: *mut ngx_event_t) {
    let _ = std::panic::catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the flush event's data is the Client that posted it (post_flush), which
        // cancels the event before it goes.
        if let Some(client) = unsafe { (*ev).data.cast::<Client>().as_ref() } {
            client.on_flush();
        }
    }));
}

impl Drop for Client {
    fn drop(&mut self) {
        self.cancel_flush();
    }
}

/// The reply to one command.
pub struct Call {
    pub(super) slot: Rc<Slot>,
}

impl Future for Call {
    type Output = Result<Value, ClientError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.slot.result.take() {
            Some(r) => Poll::Ready(r),
            None => {
                self.slot.waker.set(Some(cx.waker().clone()));
                Poll::Pending
            }
        }
    }
}
