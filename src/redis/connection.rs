//! One connection's life: opened to the right node, setup commands first, writes and reads
//! driven by nginx events, one timer for the oldest waiter, failures logged once per burst
//! with a growing reconnect delay.

use core::ffi::c_void;
use core::panic::AssertUnwindSafe;
use core::task::Waker;
use std::rc::Rc;

use ngx::ffi::{ngx_connection_t, ngx_event_t, NGX_LOG_ERR, NGX_LOG_WARN};
use ngx::ngx_log_error;
use smart_limit_core::redis::resp::{self, Value};
use smart_limit_core::redis::version::{self, Check};
use smart_limit_core::redis::{self};

use crate::clock::now_ms;
use crate::net::peer::{Connect, Io};

use super::*;

impl Client {
    /// Opens the next connection: to the data node (the target, else the next seed), or to
    /// the next Sentinel when the master is not known. A failure to start is a failure of the
    /// burst (logged), or, for a Sentinel, a move to the next one.
    pub(super) fn open(&self, st: &mut State, now: u64, wake: &mut Vec<Waker>) {
        let (addr, purpose) = match (&self.cfg.route, &st.target) {
            (_, Some(t)) => (t.clone(), Purpose::Data),
            (Route::Seeds(seeds), None) => match seeds.get(st.seed % seeds.len().max(1)) {
                Some(a) => (a.clone(), Purpose::Data),
                None => return,
            },
            (Route::Sentinel { sentinels, .. }, None) => {
                match sentinels.get(st.sentinel % sentinels.len().max(1)) {
                    Some(a) => (a.clone(), Purpose::Discover),
                    None => return,
                }
            }
        };
        st.out.clear();
        st.sent = 0;
        st.inbuf.clear();
        st.purpose = purpose;
        let owner = self as *const Client as *mut c_void;
        let a = st.connected_to.insert(addr);
        // SAFETY: the client outlives its connection (it closes it when dropped) and does
        // not move; `a` lives in the state until the next connection; event loop thread.
        let started = unsafe { st.peer.connect(a, owner, Some(on_event), Some(on_event)) };
        match started {
            Connect::Done => self.connected(st, now, wake),
            Connect::InProgress => st.phase = Phase::Connecting,
            Connect::Failed(e) => {
                st.phase = Phase::Connecting; // so that fail() treats it as a failed attempt
                self.fail(st, ClientError::Connect(Rc::from(e.to_string())), now, wake);
            }
        }
    }

    /// The connection is ready for its purpose: the master's name to a Sentinel, or the
    /// setup to the data node: `AUTH` when configured and `INFO server`. The scripts and the
    /// callers' commands wait for the server's version ([`Client::version_told`]).
    pub(super) fn secured(&self, st: &mut State, now: u64, wake: &mut Vec<Waker>) {
        st.phase = Phase::Ready;
        match (&self.cfg.route, st.purpose) {
            (Route::Sentinel { master, .. }, Purpose::Discover) => {
                st.out = redis::master_query(master);
            }
            _ => {
                // Setup replies come first: their waiters go in front of the callers'.
                let deadline = now + self.cfg.timeout_ms;
                st.waiters.push_front(Waiter {
                    expect: Expect::Version,
                    deadline,
                });
                st.out.clear();
                if let Some(auth) = &self.cfg.auth {
                    st.waiters.push_front(Waiter {
                        expect: Expect::Auth,
                        deadline,
                    });
                    st.out.extend_from_slice(auth);
                }
                st.out.extend_from_slice(&version::info_command());
                // The scripts and the callers' queued commands wait for INFO's reply.
                st.checking = true;
            }
        }
        st.sent = 0;
        if let Err(e) = self.flush(st) {
            self.fail(st, e, now, wake);
            return;
        }
        self.wait_for_more(st, now, wake);
    }

    /// Arms the timer for the oldest waiter's deadline, or clears it when nobody waits.
    pub(super) fn arm(&self, st: &mut State, now: u64) {
        match st.waiters.front() {
            Some(w) => st.peer.set_timer(w.deadline.saturating_sub(now).max(1)),
            None => st.peer.clear_timer(),
        }
    }

    /// Writes as much of the output as the socket takes (callers' commands join it once the
    /// data connection is ready).
    pub(super) fn flush(&self, st: &mut State) -> Result<(), ClientError> {
        if st.purpose == Purpose::Data && !st.checking && !st.queued.is_empty() {
            // Moves the bytes and keeps both buffers' capacity for the next round.
            st.out.append(&mut st.queued);
        }
        while st.sent < st.out.len() {
            match st.peer.send(&st.out[st.sent..]) {
                Io::Done(n) => st.sent += n,
                Io::Again => {
                    return st
                        .peer
                        .wait_write()
                        .map_err(|()| ClientError::Io(Rc::from("cannot wait to write")));
                }
                Io::Closed => return Err(ClientError::Closed),
                Io::Failed(e) => return Err(ClientError::Io(Rc::from(e.to_string()))),
            }
        }
        st.out.clear();
        st.sent = 0;
        if st.out.capacity() > 64 * 1024 {
            st.out.shrink_to(4096);
        }
        Ok(())
    }

    /// Closes the connection and drops what it carried.
    pub(super) fn close(&self, st: &mut State) {
        self.cancel_flush();
        st.peer.close();
        st.phase = Phase::Closed;
        st.checking = false;
        st.out.clear();
        st.sent = 0;
        st.inbuf.clear();
    }

    /// Every waiter gets `err`.
    pub(super) fn fail_waiters(st: &mut State, err: &ClientError, wake: &mut Vec<Waker>) {
        st.queued.clear();
        for w in st.waiters.drain(..) {
            if let Expect::Caller(slot) = w.expect {
                slot.result.set(Some(Err(err.clone())));
                if let Some(k) = slot.waker.take() {
                    wake.push(k);
                }
            }
        }
    }

    /// A failure: a Sentinel that does not answer makes way for the next (while some are
    /// untried in this round); anything else closes the connection, fails every waiter, and
    /// no new connection is tried before the backoff. The next connection goes back to the
    /// seeds, or asks the Sentinels again.
    pub(super) fn fail(&self, st: &mut State, err: ClientError, now: u64, wake: &mut Vec<Waker>) {
        let discovering = st.purpose == Purpose::Discover && st.phase != Phase::Closed;
        self.close(st);
        match &self.cfg.route {
            Route::Sentinel { sentinels, .. } => {
                st.target = None;
                if discovering {
                    st.sentinel = st.sentinel.wrapping_add(1);
                    st.sentinels_tried += 1;
                    if st.sentinels_tried < sentinels.len() {
                        self.open(st, now, wake);
                        return;
                    }
                }
            }
            Route::Seeds(seeds) => {
                if st.target.take().is_none() && seeds.len() > 1 {
                    st.seed = st.seed.wrapping_add(1);
                }
            }
        }
        Self::fail_waiters(st, &err, wake);
        let delay = st.backoff.failed(now);
        st.last_error = Rc::from(err.to_string());
        self.log_failure(st, &err, now, delay);
    }

    /// One line when a burst of failures starts, a reminder a minute while it lasts.
    fn log_failure(&self, st: &mut State, err: &ClientError, now: u64, delay: u64) {
        let log = crate::log::cycle_log();
        if log.is_null() {
            return;
        }
        match st.burst.as_mut() {
            None => {
                st.burst = Some(Burst {
                    since: now,
                    reminded_at: now,
                });
                ngx_log_error!(
                    NGX_LOG_ERR,
                    log,
                    "{}: {}; decisions follow {} until it answers again (next try in {} ms)",
                    self.cfg.label,
                    err,
                    self.cfg.policy,
                    delay
                );
            }
            Some(b) if now.saturating_sub(b.reminded_at) >= REMIND_MS => {
                b.reminded_at = now;
                ngx_log_error!(
                    NGX_LOG_ERR,
                    log,
                    "{}: still failing for {} s: {}; decisions follow {}",
                    self.cfg.label,
                    now.saturating_sub(b.since) / 1000,
                    err,
                    self.cfg.policy
                );
            }
            Some(_) => {}
        }
    }

    /// Closes without blaming Redis: an idle connection it closed, or a worker shutting down.
    fn close_quietly(&self, st: &mut State, wake: &mut Vec<Waker>) {
        self.close(st);
        Self::fail_waiters(st, &ClientError::Shutdown, wake);
    }

    /// An event on the connection: connect finished, socket readable or writable, timer.
    pub(super) fn on_event(&self, timer: bool) {
        let mut wake = Vec::new();
        if let Ok(mut st) = self.st.try_borrow_mut() {
            self.drive(&mut st, timer, &mut wake);
        }
        wake.into_iter().for_each(Waker::wake);
    }

    /// One event of the connection, in steps: a shutdown request, the reply timer, the end of
    /// a connect, then write what is queued, read what came and hand out the replies.
    fn drive(&self, st: &mut State, timer: bool, wake: &mut Vec<Waker>) {
        let now = now_ms();
        if st.peer.close_requested() {
            self.close_quietly(st, wake);
            self.shutdown_noticed();
            return;
        }
        if timer {
            self.on_timer(st, now, wake);
            return;
        }
        if st.phase == Phase::Connecting {
            match st.peer.connect_result() {
                Ok(()) => self.connected(st, now, wake),
                Err(e) => self.fail(st, ClientError::Connect(Rc::from(e.to_string())), now, wake),
            }
            return;
        }
        if st.phase != Phase::Ready {
            return;
        }
        if let Err(e) = self.flush(st) {
            self.fail(st, e, now, wake);
            return;
        }
        let eof = match self.read_input(st) {
            Ok(eof) => eof,
            Err(e) => {
                self.fail(st, e, now, wake);
                return;
            }
        };
        let handled = match st.purpose {
            Purpose::Discover => self.discovered(st, now, wake),
            Purpose::Data => self.hand_out_replies(st, wake),
        };
        let answered = match handled {
            Ok(n) => n,
            Err(e) => {
                self.fail(st, e, now, wake);
                return;
            }
        };
        if st.phase != Phase::Ready {
            return; // the connection moved on (discovery done) or failed
        }
        if answered {
            self.arm(st, now);
        }
        if eof {
            self.peer_closed(st, now, wake);
            return;
        }
        self.wait_for_more(st, now, wake);
    }

    /// The reply timer fired: the oldest waiter's deadline has passed (Redis is deemed sick),
    /// or the timer was for a waiter already answered (re-armed for the next one).
    fn on_timer(&self, st: &mut State, now: u64, wake: &mut Vec<Waker>) {
        match st.waiters.front() {
            Some(w) if w.deadline > now => self.arm(st, now),
            Some(_) => self.fail(st, ClientError::Timeout(self.cfg.timeout_ms), now, wake),
            None => {}
        }
    }

    /// Reads everything the socket has into the input buffer. Ok(true): the peer closed.
    fn read_input(&self, st: &mut State) -> Result<bool, ClientError> {
        let mut chunk = [0u8; 16 * 1024];
        loop {
            match st.peer.recv(&mut chunk) {
                Io::Done(n) => {
                    st.inbuf
                        .extend_from_slice(chunk.get(..n).unwrap_or_default());
                    if st.inbuf.len() > MAX_INBUF {
                        return Err(ClientError::Protocol(Rc::from("reply too large")));
                    }
                    if n < chunk.len() && !st.peer.read_ready() {
                        return Ok(false);
                    }
                }
                Io::Again => return Ok(false),
                Io::Closed => return Ok(true),
                Io::Failed(e) => return Err(ClientError::Io(Rc::from(e.to_string()))),
            }
        }
    }

    /// Hands each complete reply to the oldest waiter. Ok(true): at least one was answered.
    fn hand_out_replies(&self, st: &mut State, wake: &mut Vec<Waker>) -> Result<bool, ClientError> {
        let mut used = 0;
        let mut answered = false;
        let mut released = false;
        let result = loop {
            match resp::parse(st.inbuf.get(used..).unwrap_or_default()) {
                Ok(Some((value, n))) => {
                    used += n;
                    let Some(w) = st.waiters.pop_front() else {
                        break Err(ClientError::Protocol(Rc::from("a reply nobody asked for")));
                    };
                    answered = true;
                    match w.expect {
                        Expect::Caller(slot) => {
                            slot.result.set(Some(Ok(value)));
                            if let Some(k) = slot.waker.take() {
                                wake.push(k);
                            }
                        }
                        Expect::Auth => {
                            if let Some(e) = value.error_text() {
                                break Err(ClientError::Auth(Rc::from(e)));
                            }
                        }
                        Expect::Version => match self.version_told(st, &value) {
                            Ok(()) => released = true,
                            Err(e) => break Err(e),
                        },
                        Expect::Ignore => {}
                    }
                }
                Ok(None) => break Ok(answered),
                Err(e) => break Err(ClientError::Protocol(Rc::from(e.to_string()))),
            }
        };
        st.inbuf.drain(..used);
        if released && result.is_ok() {
            // The scripts and the commands that waited for the version go out now.
            self.flush(st)?;
        }
        result
    }

    /// The reply to `INFO server`: a server older than the zone needs fails the connection
    /// (the burst's line names both versions); otherwise the scripts are queued first on the
    /// connection, ahead of the callers' commands that waited, and the check is over. A reply
    /// that does not tell the version is told once per client, and the client goes on: the
    /// check must not lock out a server that would work (an ACL user without `+info`, a proxy).
    fn version_told(&self, st: &mut State, reply: &Value) -> Result<(), ClientError> {
        let at = st.connected_to.as_ref().map_or("?", |a| a.text());
        match version::check(reply, &self.cfg.needs) {
            Check::Fine(_) => {}
            Check::TooOld(found) => {
                let line = version::too_old(at, found, &self.cfg.needs);
                return Err(ClientError::Version(Rc::from(line)));
            }
            Check::Unknown(why) => {
                if !st.version_unknown_told {
                    st.version_unknown_told = true;
                    let log = crate::log::cycle_log();
                    if !log.is_null() {
                        ngx_log_error!(
                            NGX_LOG_WARN,
                            log,
                            "{}: cannot tell the version of Redis at {} ({}); going on \
                             unchecked (smart_limit needs Redis {} or later: {})",
                            self.cfg.label,
                            at,
                            why,
                            self.cfg.needs.version_text(),
                            self.cfg.needs.why
                        );
                    }
                }
            }
        }
        // Their replies come before the callers': their waiters go in front.
        let deadline = now_ms() + self.cfg.timeout_ms;
        for script in &self.cfg.scripts {
            st.waiters.push_front(Waiter {
                expect: Expect::Ignore,
                deadline,
            });
            st.out.extend_from_slice(script);
        }
        st.checking = false;
        Ok(())
    }

    /// Redis closed the connection: quietly when it was idle (a restart, its `timeout`; the
    /// next call reconnects), as a failure when calls were in flight.
    fn peer_closed(&self, st: &mut State, now: u64, wake: &mut Vec<Waker>) {
        if st.waiters.is_empty() && st.inbuf.is_empty() {
            self.close_quietly(st, wake);
        } else {
            self.fail(st, ClientError::Closed, now, wake);
        }
    }

    /// Nothing more to do now: mark the connection idle when nobody waits (a worker shutting
    /// down then closes it) and ask for the next read event.
    fn wait_for_more(&self, st: &mut State, now: u64, wake: &mut Vec<Waker>) {
        if st.waiters.is_empty() {
            st.peer.set_idle(true);
            // SAFETY: a plain global of the worker, read on its only thread.
            if unsafe { ngx::ffi::ngx_exiting } != 0 {
                self.close_quietly(st, wake);
                self.shutdown_noticed();
                return;
            }
        }
        if st.peer.wait_read().is_err() {
            let e = ClientError::Io(Rc::from("cannot wait to read"));
            self.fail(st, e, now, wake);
        }
    }

    /// A usable reply came: the end of a failure burst, if there was one.
    pub(super) fn recovered(&self, st: &mut State, now: u64) {
        st.backoff.succeeded();
        if let Some(b) = st.burst.take() {
            let log = crate::log::cycle_log();
            if !log.is_null() {
                ngx_log_error!(
                    NGX_LOG_WARN,
                    log,
                    "{}: answers again after {} ms of failures",
                    self.cfg.label,
                    now.saturating_sub(b.since)
                );
            }
        }
    }
}

/// Read and write handler of the client's connection.
pub(super) unsafe extern "C" fn on_event(ev: *mut ngx_event_t) {
    // A panic must not unwind into nginx; the client state stays consistent (RefCell).
    let _ = std::panic::catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: nginx passes an event of the client's connection: its data is that
        // connection, whose data is the Client (set in Peer::connect), which outlives it.
        let (ev, client) = unsafe {
            let ev = &mut *ev;
            let c = ev.data.cast::<ngx_connection_t>();
            let Some(client) = c.as_ref().and_then(|c| c.data.cast::<Client>().as_ref()) else {
                return;
            };
            (ev, client)
        };
        let timer = ev.timedout() != 0;
        if timer {
            ev.set_timedout(0);
        }
        client.on_event(timer);
    }));
}
