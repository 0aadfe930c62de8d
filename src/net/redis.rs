//! A Redis (RESP2) client on nginx's event loop.
//!
//! One keepalive connection per worker and zone, opened on first use and reused by every
//! request. Commands are pipelined: each caller appends its command to the output buffer and
//! takes a place in a FIFO of waiters; Redis answers in order, so the read handler hands each
//! reply to the oldest waiter. Many decisions on one worker are thus in flight together and
//! none waits for another's round trip.
//!
//! Time is bounded by one timer on the connection's read event, armed for the oldest waiter's
//! deadline (enqueue time + `timeout`). When it fires, Redis is deemed sick: the connection is
//! closed and every waiter gets an error at once. After any failure (connect refused, timeout,
//! reset, garbage) new connections are not tried until a backoff delay has passed (doubling,
//! up to a few seconds); callers ask [`Client::available`] first and, while it says no, apply
//! their failure policy without touching the network. The first reply its caller finds good
//! ([`Client::reply_was_good`]) ends the "burst": one error line when a burst starts (and a
//! reminder a minute), one line when Redis answers again. Error replies and replies of the
//! wrong shape do not end it; the latter count as failures ([`Client::reply_was_bad`]), so a
//! sick server that answers nonsense is retried ever more slowly, not every 100 ms.
//!
//! Nothing here blocks and nothing panics across FFI: the event handlers catch panics, replies
//! are parsed fallibly ([`smart_limit_core::resp`]), and callers are woken only after the
//! client's state is released, so a woken task may call the client again.

use core::cell::{Cell, RefCell, UnsafeCell};
use core::ffi::c_void;
use core::fmt;
use core::future::Future;
use core::panic::AssertUnwindSafe;
use core::pin::Pin;
use core::task::{Context, Poll, Waker};
use std::collections::VecDeque;
use std::rc::Rc;

use ngx::ffi::{
    ngx_connection_t, ngx_delete_posted_event, ngx_event_t, ngx_post_event, ngx_posted_events,
    NGX_LOG_ERR, NGX_LOG_WARN,
};
use ngx::ngx_log_error;
use smart_limit_core::redis::Backoff;
use smart_limit_core::resp::{self, Value};

use super::peer::{Addr, Connect, Io, Peer};
use crate::clock::now_ms;

/// First and largest delay before reconnecting after a failure.
const BACKOFF_FIRST_MS: u64 = 100;
const BACKOFF_MAX_MS: u64 = 3_000;
/// A failure burst logs a reminder this often while it lasts.
const REMIND_MS: u64 = 60_000;
/// Unparsed input beyond this is garbage (the module's replies are tiny).
const MAX_INBUF: usize = 4 << 20;

/// Why a call got no reply.
#[derive(Debug, Clone)]
pub enum ClientError {
    /// Backing off after a failure: not tried (the last failure's text).
    Unavailable(Rc<str>),
    Connect(Rc<str>),
    /// No reply within the timeout (ms).
    Timeout(u64),
    /// Redis closed the connection with calls in flight.
    Closed,
    Io(Rc<str>),
    /// Bytes that are not RESP, or a reply nobody asked for.
    Protocol(Rc<str>),
    /// The worker is shutting down.
    Shutdown,
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::Unavailable(last) => write!(f, "not retried yet after: {last}"),
            ClientError::Connect(e) => write!(f, "cannot connect: {e}"),
            ClientError::Timeout(ms) => write!(f, "no reply within {ms} ms"),
            ClientError::Closed => f.write_str("connection closed by redis"),
            ClientError::Io(e) => write!(f, "connection error: {e}"),
            ClientError::Protocol(e) => write!(f, "garbage from redis: {e}"),
            ClientError::Shutdown => f.write_str("worker shutting down"),
        }
    }
}

/// Where a reply goes: filled by the client, taken by the caller's future.
#[derive(Default)]
struct Slot {
    result: Cell<Option<Result<Value, ClientError>>>,
    waker: Cell<Option<Waker>>,
}

struct Waiter {
    /// None: nobody waits for this reply (the connection's SCRIPT LOAD).
    slot: Option<Rc<Slot>>,
    deadline: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Closed,
    Connecting,
    Ready,
}

struct Burst {
    since: u64,
    reminded_at: u64,
}

struct State {
    peer: Peer,
    phase: Phase,
    out: Vec<u8>,
    sent: usize,
    inbuf: Vec<u8>,
    waiters: VecDeque<Waiter>,
    backoff: Backoff,
    burst: Option<Burst>,
    last_error: Rc<str>,
}

/// The client of one zone in one worker. It must not move once used: the connection keeps a
/// pointer to it (it lives in the zone, allocated in the cycle pool).
pub struct Client {
    addr: Addr,
    timeout_ms: u64,
    /// Sent first on every new connection (the zone's `SCRIPT LOAD`); its reply is dropped.
    prelude: Vec<u8>,
    /// Start of log lines, e.g. `smart_limit zone "shop": redis 127.0.0.1:6379`.
    label: String,
    /// What decisions do meanwhile, for the log line, e.g. `on_error=local`.
    policy: String,
    st: RefCell<State>,
    /// Posted when a command is queued: the output is written once at the end of the event
    /// loop's round, so the commands of every request handled in that round leave in one
    /// write (and Redis reads them, and answers them, in one go).
    flush_ev: UnsafeCell<ngx_event_t>,
}

impl Client {
    pub fn new(
        addr: Addr,
        timeout_ms: u64,
        prelude: Vec<u8>,
        label: String,
        policy: String,
    ) -> Client {
        Client {
            addr,
            timeout_ms,
            prelude,
            label,
            policy,
            st: RefCell::new(State {
                peer: Peer::default(),
                phase: Phase::Closed,
                out: Vec::new(),
                sent: 0,
                inbuf: Vec::new(),
                waiters: VecDeque::new(),
                backoff: Backoff::new(BACKOFF_FIRST_MS, BACKOFF_MAX_MS),
                burst: None,
                last_error: Rc::from(""),
            }),
            // SAFETY: an all-zero ngx_event_t is an idle event; it is set up on first use.
            flush_ev: UnsafeCell::new(unsafe { core::mem::zeroed() }),
        }
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

    fn cancel_flush(&self) {
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

    pub fn addr(&self) -> &str {
        self.addr.text()
    }

    /// False while backing off after a failure: a call now would fail at once, so the caller
    /// applies its failure policy without waiting.
    pub fn available(&self, now: u64) -> bool {
        match self.st.try_borrow() {
            Ok(st) => st.phase != Phase::Closed || st.backoff.may_try(now),
            Err(_) => false,
        }
    }

    /// Sends `cmd` (one encoded command) and resolves with its reply, or an error within the
    /// timeout.
    pub fn call(&self, cmd: Vec<u8>) -> Call {
        let slot = Rc::new(Slot::default());
        if let Err(e) = self.submit(cmd, Some(slot.clone())) {
            slot.result.set(Some(Err(e)));
        }
        Call { slot }
    }

    fn submit(&self, cmd: Vec<u8>, slot: Option<Rc<Slot>>) -> Result<(), ClientError> {
        let mut wake = Vec::new();
        let res = match self.st.try_borrow_mut() {
            Ok(mut st) => self.submit_locked(&mut st, cmd, slot, &mut wake),
            Err(_) => Err(ClientError::Io(Rc::from("client busy"))),
        };
        wake.into_iter().for_each(Waker::wake);
        res
    }

    fn submit_locked(
        &self,
        st: &mut State,
        cmd: Vec<u8>,
        slot: Option<Rc<Slot>>,
        wake: &mut Vec<Waker>,
    ) -> Result<(), ClientError> {
        let now = now_ms();
        if st.phase == Phase::Closed {
            if !st.backoff.may_try(now) {
                return Err(ClientError::Unavailable(st.last_error.clone()));
            }
            let owner = self as *const Client as *mut c_void;
            // SAFETY: the client outlives its connection (it closes it when dropped) and does
            // not move; we run in the worker's event loop.
            let started = unsafe {
                st.peer
                    .connect(&self.addr, owner, Some(on_event), Some(on_event))
            };
            match started {
                Connect::Done => st.phase = Phase::Ready,
                Connect::InProgress => st.phase = Phase::Connecting,
                Connect::Failed(e) => {
                    let err = ClientError::Connect(Rc::from(e.to_string()));
                    self.fail(st, err.clone(), now, wake);
                    return Err(err);
                }
            }
            st.out.clear();
            st.sent = 0;
            st.inbuf.clear();
            st.out.extend_from_slice(&self.prelude);
            st.waiters.push_back(Waiter {
                slot: None,
                deadline: now + self.timeout_ms,
            });
        }
        st.out.extend_from_slice(&cmd);
        st.waiters.push_back(Waiter {
            slot,
            deadline: now + self.timeout_ms,
        });
        st.peer.set_idle(false);
        if !st.peer.timer_set() {
            self.arm(st, now);
        }
        if st.phase == Phase::Ready {
            self.post_flush();
        }
        Ok(())
    }

    /// Arms the timer for the oldest waiter's deadline, or clears it when nobody waits.
    fn arm(&self, st: &mut State, now: u64) {
        match st.waiters.front() {
            Some(w) => st.peer.set_timer(w.deadline.saturating_sub(now).max(1)),
            None => st.peer.clear_timer(),
        }
    }

    /// Writes as much of the output buffer as the socket takes.
    fn flush(&self, st: &mut State) -> Result<(), ClientError> {
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

    /// Closes the connection and fails every waiter; no new connection before the backoff.
    fn fail(&self, st: &mut State, err: ClientError, now: u64, wake: &mut Vec<Waker>) {
        self.cancel_flush();
        st.peer.close();
        st.phase = Phase::Closed;
        st.out.clear();
        st.sent = 0;
        st.inbuf.clear();
        for w in st.waiters.drain(..) {
            if let Some(slot) = w.slot {
                slot.result.set(Some(Err(err.clone())));
                if let Some(k) = slot.waker.take() {
                    wake.push(k);
                }
            }
        }
        let delay = st.backoff.failed(now);
        st.last_error = Rc::from(err.to_string());
        let log = crate::log::cycle_log();
        match st.burst.as_mut() {
            None => {
                st.burst = Some(Burst {
                    since: now,
                    reminded_at: now,
                });
                if !log.is_null() {
                    ngx_log_error!(
                        NGX_LOG_ERR,
                        log,
                        "{}: {}; decisions follow {} until it answers again (next try in {} ms)",
                        self.label,
                        err,
                        self.policy,
                        delay
                    );
                }
            }
            Some(b) if now.saturating_sub(b.reminded_at) >= REMIND_MS => {
                b.reminded_at = now;
                if !log.is_null() {
                    ngx_log_error!(
                        NGX_LOG_ERR,
                        log,
                        "{}: still failing for {} s: {}; decisions follow {}",
                        self.label,
                        now.saturating_sub(b.since) / 1000,
                        err,
                        self.policy
                    );
                }
            }
            Some(_) => {}
        }
    }

    /// Closes without blaming Redis: an idle connection it closed, or a worker shutting down.
    fn close_quietly(&self, st: &mut State, wake: &mut Vec<Waker>) {
        self.cancel_flush();
        st.peer.close();
        st.phase = Phase::Closed;
        st.out.clear();
        st.sent = 0;
        st.inbuf.clear();
        for w in st.waiters.drain(..) {
            if let Some(slot) = w.slot {
                slot.result.set(Some(Err(ClientError::Shutdown)));
                if let Some(k) = slot.waker.take() {
                    wake.push(k);
                }
            }
        }
    }

    /// An event on the connection: connect finished, socket readable or writable, timer.
    fn on_event(&self, timer: bool) {
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
            return;
        }
        if timer {
            self.on_timer(st, now, wake);
            return;
        }
        if self.finish_connect(st, now, wake).is_err() || st.phase != Phase::Ready {
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
        let answered = match self.hand_out_replies(st, wake) {
            Ok(n) => n,
            Err(e) => {
                self.fail(st, e, now, wake);
                return;
            }
        };
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
            Some(_) => self.fail(st, ClientError::Timeout(self.timeout_ms), now, wake),
            None => {}
        }
    }

    /// A connect in progress signalled: it succeeded (the connection is ready) or failed.
    fn finish_connect(&self, st: &mut State, now: u64, wake: &mut Vec<Waker>) -> Result<(), ()> {
        if st.phase == Phase::Connecting {
            if let Err(e) = st.peer.connect_result() {
                self.fail(st, ClientError::Connect(Rc::from(e.to_string())), now, wake);
                return Err(());
            }
            st.phase = Phase::Ready;
        }
        Ok(())
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
        let result = loop {
            match resp::parse(st.inbuf.get(used..).unwrap_or_default()) {
                Ok(Some((value, n))) => {
                    used += n;
                    let Some(w) = st.waiters.pop_front() else {
                        break Err(ClientError::Protocol(Rc::from("a reply nobody asked for")));
                    };
                    answered = true;
                    if let Some(slot) = w.slot {
                        slot.result.set(Some(Ok(value)));
                        if let Some(k) = slot.waker.take() {
                            wake.push(k);
                        }
                    }
                }
                Ok(None) => break Ok(answered),
                Err(e) => break Err(ClientError::Protocol(Rc::from(e.to_string()))),
            }
        };
        st.inbuf.drain(..used);
        result
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
                return;
            }
        }
        if st.peer.wait_read().is_err() {
            let e = ClientError::Io(Rc::from("cannot wait to read"));
            self.fail(st, e, now, wake);
        }
    }

    /// The caller found a reply good (the shape it expects): Redis answers again, so a
    /// failure burst ends and the reconnect delay starts over. Only a reply its caller could
    /// use counts: an error reply or one of the wrong shape does not.
    pub fn reply_was_good(&self) {
        if let Ok(mut st) = self.st.try_borrow_mut() {
            self.recovered(&mut st, now_ms());
        }
    }

    /// The caller found a reply it cannot use (wrong shape or type): Redis is not well. The
    /// connection is closed and the reconnect delay grows, as after any failure.
    pub fn reply_was_bad(&self, what: &str) {
        let mut wake = Vec::new();
        if let Ok(mut st) = self.st.try_borrow_mut() {
            let e = ClientError::Protocol(Rc::from(what));
            self.fail(&mut st, e, now_ms(), &mut wake);
        }
        wake.into_iter().for_each(Waker::wake);
    }

    /// A usable reply came: the end of a failure burst, if there was one.
    fn recovered(&self, st: &mut State, now: u64) {
        st.backoff.succeeded();
        if let Some(b) = st.burst.take() {
            let log = crate::log::cycle_log();
            if !log.is_null() {
                ngx_log_error!(
                    NGX_LOG_WARN,
                    log,
                    "{}: answers again after {} ms of failures",
                    self.label,
                    now.saturating_sub(b.since)
                );
            }
        }
    }
}

/// Read and write handler of the client's connection.
unsafe extern "C" fn on_event(ev: *mut ngx_event_t) {
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

/// The reply to one [`Client::call`].
pub struct Call {
    slot: Rc<Slot>,
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
