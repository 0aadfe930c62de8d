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
//! Every new connection (after TLS, when configured: [`crate::net::tls`]) first sends `AUTH` when a
//! password is configured (a refusal fails the connection, logged once per burst; the password
//! is never written anywhere) and `INFO server`, and waits for them: a server older than the
//! zone needs ([`smart_limit_core::redis::version`]: 6.2 for `sync=`) fails the connection,
//! with one line per burst naming both versions, so the zone's failure policy applies instead
//! of scripts that would fail half-way; a reply that does not tell the version (an ACL user
//! without `+info`, a proxy) is one warning per worker and zone, and the client goes on. Then
//! `SCRIPT LOAD` of the zone's script and the callers' commands go out. Sentinels are not
//! asked: the master they name is, when the client connects to it.
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

//!
//! The parts: [`client`] (what callers use: commands in, replies out), `connection` (one
//! connection's life: open, write, read, fail, back off), `tls` (the handshake step),
//! `sentinel` (finding the master), `cluster` (MOVED, ASK, TRYAGAIN), `config` (what a
//! zone's directive sets).

mod client;
mod cluster;
mod config;
mod connection;
mod sentinel;
mod tls;

use core::cell::{Cell, RefCell, UnsafeCell};
use core::fmt;
use core::task::Waker;
use std::collections::VecDeque;
use std::rc::Rc;

use ngx::ffi::ngx_event_t;
use smart_limit_core::redis::resp::Value;
use smart_limit_core::redis::Backoff;

use crate::net::peer::{Addr, Peer};

pub use config::{ClientConfig, ConfigError};

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
    /// The server is older than the zone needs: the whole line (both versions, why).
    Version(Rc<str>),
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
            ClientError::Version(e) => f.write_str(e),
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
    /// `INFO server`: a server too old fails the connection; otherwise the scripts and the
    /// callers' commands go out.
    Version,
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
    /// The data connection waits for the server's version: nothing but the setup goes out.
    checking: bool,
    /// The server's version could not be read once already (warned once per client).
    version_unknown_told: bool,
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
    /// Called once when this worker's graceful shutdown reaches the connection (nginx closes
    /// it as idle, or a reply comes while the worker is exiting): the zone's last sync.
    on_shutdown: Cell<Option<ShutdownHook>>,
}

/// A zone's step for a worker's graceful shutdown, and the zone it is for.
#[derive(Clone, Copy)]
pub struct ShutdownHook {
    pub run: fn(*const core::ffi::c_void),
    pub owner: *const core::ffi::c_void,
}
