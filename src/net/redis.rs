//! A Redis (RESP2) client on nginx's event loop, for Redis as operators run it ([S17]).
//!
//! One keepalive connection per worker and zone, opened on first use and reused by every
//! request. Commands are pipelined: each caller appends its command and takes a place in a
//! FIFO of waiters; Redis answers in order, so the read handler hands each reply to the oldest
//! waiter. Many decisions on one worker are thus in flight together.
//!
//! Where the connection goes ([`Route`]):
//! - `redis=HOST:PORT[,...]`: the first seed that answers; a Redis Cluster's `MOVED` points the
//!   client at the node that holds the room's slot (all of a room's keys share one slot), `ASK`
//!   sends one command there behind `ASKING`, `TRYAGAIN` (a slot half-migrated) is retried a
//!   moment later ([`Client::request`]); a failed node sends the client back to the seeds;
//! - `sentinel=HOST:PORT[,...] master=NAME`: before connecting, a Sentinel is asked for the
//!   master (`SENTINEL get-master-addr-by-name`), the next Sentinel when one does not answer;
//!   any failure (a dead master, a demoted one answering `READONLY`) makes the next connection
//!   ask again, and reconnection is retried every `timeout` at most, so decisions resume on the
//!   new master within the failover and about one timeout.
//!
//! Every new connection (after TLS, when configured: [`super::tls`]) first sends `AUTH` when a
//! password is configured (a refusal fails the connection, logged once per burst; the password
//! is never written anywhere), then `SCRIPT LOAD` of the zone's script.
//!
//! Time is bounded by one timer on the connection's read event, armed for the oldest waiter's
//! deadline (enqueue time + `timeout`). When it fires, Redis is deemed sick: the connection is
//! closed and every waiter gets an error at once. After any failure new connections are not
//! tried until a backoff delay has passed (doubling, up to a few seconds); callers ask
//! [`Client::available`] first and, while it says no, apply their failure policy without
//! touching the network. The first reply its caller finds good ([`Client::reply_was_good`])
//! ends the "burst": one error line when a burst starts (and a reminder a minute), one line
//! when Redis answers again. Replies of the wrong shape count as failures
//! ([`Client::reply_was_bad`]).
//!
//! Nothing here blocks and nothing panics across FFI: the event handlers catch panics, replies
//! are parsed fallibly ([`smart_limit_core::redis::resp`]), and callers are woken only after the
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
use std::time::Duration;

use ngx::ffi::{
    ngx_conf_full_name, ngx_conf_t, ngx_connection_t, ngx_delete_posted_event, ngx_event_t,
    ngx_post_event, ngx_posted_events, ngx_str_t, NGX_LOG_ERR, NGX_LOG_NOTICE, NGX_LOG_WARN,
};
use ngx::ngx_log_error;
use smart_limit_core::redis::params::{HostPort, RedisParams};
use smart_limit_core::redis::resp::{self, Value};
use smart_limit_core::redis::{self, Backoff, Form, BACKOFF_FIRST_MS, BACKOFF_MAX_MS};

use super::peer::{Addr, Connect, Io, Peer};
use super::tls::{Handshake, Tls};
use crate::clock::now_ms;

/// A failure burst logs a reminder this often while it lasts.
const REMIND_MS: u64 = 60_000;
/// Unparsed input beyond this is garbage (the module's replies are tiny).
const MAX_INBUF: usize = 4 << 20;
/// Redirections one request follows before it gives up.
const MAX_REDIRECTS: u32 = 5;
/// Wait before retrying a `TRYAGAIN` (a slot being migrated key by key).
const TRYAGAIN_MS: u64 = 20;

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
    /// TLS: the handshake failed or the certificate did not verify.
    Tls(Rc<str>),
    /// `AUTH` was refused: Redis's words (never the password).
    Auth(Rc<str>),
    /// No Sentinel named the master.
    Discovery(Rc<str>),
    /// The connection moved to another node (a cluster redirect) before the reply came: the
    /// request is sent again ([`Client::request`]).
    Redirected,
    /// The room's slot kept moving between cluster nodes for longer than the timeout.
    Migrating,
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
            ClientError::Tls(e) => write!(f, "TLS: {e}"),
            ClientError::Auth(e) => write!(f, "authentication refused: {e}"),
            ClientError::Discovery(e) => write!(f, "no master from the sentinels: {e}"),
            ClientError::Redirected => f.write_str("moved to another cluster node"),
            ClientError::Migrating => f.write_str("the room's cluster slot is being migrated"),
            ClientError::Shutdown => f.write_str("worker shutting down"),
        }
    }
}

/// Where connections go.
pub enum Route {
    /// `redis=`: a server, or a cluster's seeds (tried in turn).
    Seeds(Vec<Addr>),
    /// `sentinel=` and `master=`.
    Sentinel {
        sentinels: Vec<Addr>,
        master: String,
    },
}

/// Everything a client needs, made at configuration time from the zone's parameters.
pub struct ClientConfig {
    pub route: Route,
    /// `AUTH [user] password` (the only copy of the secret; never logged), first on every
    /// new data connection when configured: an error reply fails the connection.
    pub auth: Option<Vec<u8>>,
    /// `SCRIPT LOAD` of the zone's script(s), next (their replies are not needed: a server
    /// that refuses them answers the scripts' calls with the reason, which their callers log).
    pub scripts: Vec<Vec<u8>>,
    pub tls: Option<Tls>,
    pub timeout_ms: u64,
    /// Start of log lines, e.g. `smart_limit zone "shop": redis 127.0.0.1:6379`.
    pub label: String,
    /// What decisions do meanwhile, for the log line, e.g. `on_error=local`.
    pub policy: String,
    /// Longest wait before a new connection is tried after failures (the backoff's cap).
    pub retry_max_ms: u64,
}

impl ClientConfig {
    /// Resolves the addresses (like upstream servers), reads the password file and makes the
    /// TLS context. Errors name the parameter.
    pub fn new(
        cf: &mut ngx_conf_t,
        p: &RedisParams,
        timeout_ms: u64,
        scripts: Vec<Vec<u8>>,
        zone_label: &str,
        policy: &str,
    ) -> Result<ClientConfig, String> {
        let resolve = |cf: &mut ngx_conf_t, what: &str, list: &[HostPort]| {
            list.iter()
                .map(|h| Addr::resolve(cf, &h.text).map_err(|e| format!("{what}={}: {e}", h.text)))
                .collect::<Result<Vec<Addr>, String>>()
        };
        let route = match &p.master {
            Some(master) if !p.sentinels.is_empty() => Route::Sentinel {
                sentinels: resolve(cf, "sentinel", &p.sentinels)?,
                master: master.clone(),
            },
            _ => Route::Seeds(resolve(cf, "redis", &p.seeds)?),
        };
        let auth = match &p.password_file {
            Some(file) => Some(auth_command(cf, p.user.as_deref(), file)?),
            None => None,
        };
        Ok(ClientConfig {
            route,
            auth,
            scripts,
            tls: Tls::new(cf, p)?,
            timeout_ms,
            label: format!("{zone_label}: redis {}", p.describe()),
            policy: policy.to_string(),
            retry_max_ms: BACKOFF_MAX_MS,
        })
    }

    /// For a client that calls once an interval (a sync): after failures it tries again at the
    /// next interval at the latest, so a fleet is back within an interval of Redis's return.
    pub fn retry_within(mut self, interval_ms: u64) -> ClientConfig {
        self.retry_max_ms = interval_ms.clamp(BACKOFF_FIRST_MS, BACKOFF_MAX_MS);
        self
    }
}

/// `AUTH [user] password` from `redis_password_file=` (its first line; relative to the
/// configuration's prefix, as nginx's own files). The error never quotes the file's content.
fn auth_command(cf: &mut ngx_conf_t, user: Option<&str>, file: &str) -> Result<Vec<u8>, String> {
    // SAFETY: the configuration's pool is live while it is parsed.
    let mut name =
        unsafe { ngx_str_t::from_bytes(cf.pool, file.as_bytes()) }.ok_or("out of memory")?;
    // SAFETY: the cycle being configured; nginx may replace `name` with a pool string.
    if unsafe { ngx_conf_full_name(cf.cycle, &mut name, 1) } != 0 {
        return Err(format!("redis_password_file=\"{file}\": bad file name"));
    }
    let path = name.to_string();
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("redis_password_file=\"{path}\": cannot read it: {e}"))?;
    let password = text.lines().next().unwrap_or("").trim_end_matches('\r');
    if password.is_empty() {
        return Err(format!(
            "redis_password_file=\"{path}\": the first line (the password) is empty"
        ));
    }
    Ok(redis::auth_command(user, password))
}

/// Where a reply goes: filled by the client, taken by the caller's future.
#[derive(Default)]
struct Slot {
    result: Cell<Option<Result<Value, ClientError>>>,
    waker: Cell<Option<Waker>>,
}

/// What a reply is for.
enum Expect {
    /// A caller's command.
    Caller(Rc<Slot>),
    /// `AUTH`: an error reply fails the connection.
    Auth,
    /// `SCRIPT LOAD`, or `ASKING` before a redirected command: the reply is dropped.
    Ignore,
}

struct Waiter {
    expect: Expect,
    deadline: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Closed,
    Connecting,
    Handshaking,
    Ready,
}

/// What the connection in progress is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Purpose {
    /// Commands: the server, a cluster node, the master.
    Data,
    /// Asking a Sentinel for the master.
    Discover,
}

struct Burst {
    since: u64,
    reminded_at: u64,
}

struct State {
    peer: Peer,
    phase: Phase,
    purpose: Purpose,
    /// The address of the connection in progress (it must outlive the connection).
    connected_to: Option<Addr>,
    /// The data node to use: the master a Sentinel named, or a cluster redirect's node.
    /// None: the next seed (or ask a Sentinel).
    target: Option<Addr>,
    /// The node the last `MOVED` named (logged when it changes).
    slot_node: Option<Addr>,
    seed: usize,
    sentinel: usize,
    /// Sentinels tried in this round of discovery.
    sentinels_tried: usize,
    /// Bytes to write on the connection; `sent` of them are written.
    out: Vec<u8>,
    sent: usize,
    /// Callers' commands not yet on a ready data connection.
    queued: Vec<u8>,
    inbuf: Vec<u8>,
    waiters: VecDeque<Waiter>,
    backoff: Backoff,
    burst: Option<Burst>,
    last_error: Rc<str>,
}

/// The client of one zone in one worker. It must not move once used: the connection keeps a
/// pointer to it (it lives in the zone, allocated in the cycle pool).
pub struct Client {
    cfg: ClientConfig,
    st: RefCell<State>,
    /// Posted when a command is queued: the output is written once at the end of the event
    /// loop's round, so the commands of every request handled in that round leave in one
    /// write (and Redis reads them, and answers them, in one go).
    flush_ev: UnsafeCell<ngx_event_t>,
}

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
                inbuf: Vec::new(),
                waiters: VecDeque::new(),
                backoff,
                burst: None,
                last_error: Rc::from(""),
            }),
            // SAFETY: an all-zero ngx_event_t is an idle event; it is set up on first use.
            flush_ev: UnsafeCell::new(unsafe { core::mem::zeroed() }),
        }
    }

    pub fn label(&self) -> &str {
        &self.cfg.label
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

    /// One command (behind `ASKING` when asked to).
    fn send(&self, cmd: &[u8], asking: bool) -> Call {
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

    /// Opens the next connection: to the data node (the target, else the next seed), or to
    /// the next Sentinel when the master is not known. A failure to start is a failure of the
    /// burst (logged), or, for a Sentinel, a move to the next one.
    fn open(&self, st: &mut State, now: u64, wake: &mut Vec<Waker>) {
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

    /// The TCP connection is up: TLS first when configured, then the connection's purpose.
    fn connected(&self, st: &mut State, now: u64, wake: &mut Vec<Waker>) {
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
            _ => Err("no TLS connection".to_string()),
        };
        match verdict {
            Ok(()) => self.secured(st, now, wake),
            Err(e) => self.fail(st, ClientError::Tls(Rc::from(e)), now, wake),
        }
    }

    /// The connection is ready for its purpose: the master's name to a Sentinel, or the
    /// setup commands and every queued command to the data node.
    fn secured(&self, st: &mut State, now: u64, wake: &mut Vec<Waker>) {
        st.phase = Phase::Ready;
        match (&self.cfg.route, st.purpose) {
            (Route::Sentinel { master, .. }, Purpose::Discover) => {
                st.out = redis::master_query(master);
            }
            _ => {
                // Setup replies come first: their waiters go in front of the callers'.
                let deadline = now + self.cfg.timeout_ms;
                for _ in &self.cfg.scripts {
                    st.waiters.push_front(Waiter {
                        expect: Expect::Ignore,
                        deadline,
                    });
                }
                st.out.clear();
                if let Some(auth) = &self.cfg.auth {
                    st.waiters.push_front(Waiter {
                        expect: Expect::Auth,
                        deadline,
                    });
                    st.out.extend_from_slice(auth);
                }
                for script in &self.cfg.scripts {
                    st.out.extend_from_slice(script);
                }
                // The callers' queued commands follow in flush().
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
    fn arm(&self, st: &mut State, now: u64) {
        match st.waiters.front() {
            Some(w) => st.peer.set_timer(w.deadline.saturating_sub(now).max(1)),
            None => st.peer.clear_timer(),
        }
    }

    /// Writes as much of the output as the socket takes (callers' commands join it once the
    /// data connection is ready).
    fn flush(&self, st: &mut State) -> Result<(), ClientError> {
        if st.purpose == Purpose::Data && !st.queued.is_empty() {
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
    fn close(&self, st: &mut State) {
        self.cancel_flush();
        st.peer.close();
        st.phase = Phase::Closed;
        st.out.clear();
        st.sent = 0;
        st.inbuf.clear();
    }

    /// Every waiter gets `err`.
    fn fail_waiters(st: &mut State, err: &ClientError, wake: &mut Vec<Waker>) {
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
    fn fail(&self, st: &mut State, err: ClientError, now: u64, wake: &mut Vec<Waker>) {
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

    /// A cluster redirection: the room's slot is on `addr` (`MOVED`: from now on; `ASK`: for
    /// the command about to be sent again). The connection moves there; the commands in flight
    /// on the old one are sent again by their callers.
    fn redirect(&self, addr: Addr, moved: bool) {
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

    /// An event on the connection: connect finished, socket readable or writable, timer.
    fn on_event(&self, timer: bool) {
        let mut wake = Vec::new();
        if let Ok(mut st) = self.st.try_borrow_mut() {
            self.drive(&mut st, timer, &mut wake);
        }
        wake.into_iter().for_each(Waker::wake);
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

    /// A Sentinel's answer: the master's address, and on to it. Ok(false): not complete yet.
    fn discovered(
        &self,
        st: &mut State,
        now: u64,
        wake: &mut Vec<Waker>,
    ) -> Result<bool, ClientError> {
        let Some((value, _)) =
            resp::parse(&st.inbuf).map_err(|e| ClientError::Protocol(Rc::from(e.to_string())))?
        else {
            return Ok(false);
        };
        let addr = redis::master_address(&value)
            .map(Addr::from_socket)
            .ok_or_else(|| {
                ClientError::Discovery(Rc::from(match value.error_text() {
                    Some(e) => format!("a sentinel answered: {e}"),
                    None => "a sentinel does not know the master".to_string(),
                }))
            })?;
        self.close(st);
        st.target = Some(addr);
        self.open(st, now, wake);
        Ok(true)
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
                        Expect::Ignore => {}
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
                    self.cfg.label,
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
