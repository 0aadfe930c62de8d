//! One TCP connection driven by nginx's event loop: an `ngx_peer_connection_t` connected with
//! `ngx_event_connect_peer`, read and written with the connection's own `recv`/`send`, woken by
//! the read and write handlers its owner installs, bounded by a timer on the read event.
//!
//! Nothing here blocks: connect returns "in progress", send and recv return "again", and the
//! owner is called back from the event loop when the socket is ready or the timer fires. The
//! owner (the Redis client) decides what each event means; this layer only wraps the FFI.
//!
//! Learnt from nginx-acme's `src/net/peer_conn.rs`; written for a long-lived, pipelined
//! connection instead of one request per connection.

use core::ffi::c_void;
use core::ptr;
use std::io;
use std::net::SocketAddr;

use ngx::ffi::{
    getsockopt, ngx_close_connection, ngx_conf_t, ngx_connection_log_error_e_NGX_ERROR_INFO,
    ngx_connection_t, ngx_event_connect_peer, ngx_event_get_peer, ngx_event_handler_pt,
    ngx_event_t, ngx_handle_read_event, ngx_handle_write_event, ngx_int_t, ngx_log_t,
    ngx_parse_url, ngx_peer_connection_t, ngx_str_t, ngx_tcp_nodelay, ngx_url_t, socklen_t,
    NGX_AGAIN, NGX_LOG_ALERT, NGX_OK, SOL_SOCKET, SO_ERROR,
};
use ngx::ffi::{ngx_add_timer, ngx_create_pool, ngx_del_timer, ngx_destroy_pool};

use super::NetError;

/// A resolved peer address, kept for the life of the configuration (it lives in the zone,
/// which lives in the cycle pool), so the pointers handed to nginx stay valid.
pub struct Addr {
    sockaddr: Vec<u8>,
    socklen: socklen_t,
    /// "host:port" as configured, for log lines; `name` points into it.
    text: String,
    name: ngx_str_t,
    /// The host alone (a name or an address): what TLS verifies without `redis_tls_name=`.
    host: String,
}

impl Addr {
    /// Resolves `HOST:PORT` at configuration time, as nginx does for upstream servers
    /// (a name resolving to several addresses uses the first).
    pub fn resolve(cf: &mut ngx_conf_t, text: &str) -> Result<Addr, NetError> {
        let pool = cf.pool;
        // SAFETY: an all-zero ngx_url_t is the C "unset" value ngx_parse_url expects.
        let mut u: ngx_url_t = unsafe { core::mem::zeroed() };
        // SAFETY: the configuration's pool is live.
        u.url =
            unsafe { ngx_str_t::from_bytes(pool, text.as_bytes()) }.ok_or(NetError::NoMemory)?;
        u.default_port = 6379;
        // SAFETY: a live pool and an initialised url.
        if unsafe { ngx_parse_url(pool, &mut u) } != NGX_OK as ngx_int_t {
            let why = if u.err.is_null() {
                "invalid address".to_string()
            } else {
                // SAFETY: ngx_parse_url sets `err` to a static C string.
                unsafe { core::ffi::CStr::from_ptr(u.err) }
                    .to_string_lossy()
                    .into_owned()
            };
            return Err(NetError::Address {
                why,
                text: text.to_string(),
            });
        }
        // SAFETY: when naddrs > 0, `addrs` points at that many parsed addresses in the pool.
        let Some(a) = (unsafe { u.addrs.as_ref() }).filter(|_| u.naddrs > 0) else {
            return Err(NetError::HostNotFound(text.to_string()));
        };
        if a.sockaddr.is_null() || a.socklen == 0 {
            return Err(NetError::NoAddress(text.to_string()));
        }
        // SAFETY: `sockaddr` holds `socklen` bytes (set together by ngx_parse_url).
        let bytes =
            unsafe { core::slice::from_raw_parts(a.sockaddr as *const u8, a.socklen as usize) };
        let host = u
            .host
            .to_str()
            .unwrap_or_default()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let text = a.name.to_str().unwrap_or(text).to_string();
        Ok(Addr::new(bytes.to_vec(), a.socklen, text, host))
    }

    fn new(sockaddr: Vec<u8>, socklen: socklen_t, text: String, host: String) -> Addr {
        let mut addr = Addr {
            sockaddr,
            socklen,
            text,
            name: ngx_str_t::empty(),
            host,
        };
        addr.name = ngx_str_t {
            len: addr.text.len(),
            data: addr.text.as_ptr() as *mut u8,
        };
        addr
    }

    /// An address learnt at run time (a cluster redirect, a Sentinel's answer): numeric only,
    /// so no resolver is needed on the event loop.
    pub fn from_socket(sa: SocketAddr) -> Addr {
        let (bytes, len) = match sa {
            SocketAddr::V4(v4) => {
                // SAFETY: an all-zero sockaddr_in is valid; the fields are set below.
                let mut s: libc::sockaddr_in = unsafe { core::mem::zeroed() };
                s.sin_family = libc::AF_INET as libc::sa_family_t;
                s.sin_port = v4.port().to_be();
                s.sin_addr.s_addr = u32::from_ne_bytes(v4.ip().octets());
                (as_bytes(&s), core::mem::size_of::<libc::sockaddr_in>())
            }
            SocketAddr::V6(v6) => {
                // SAFETY: as above.
                let mut s: libc::sockaddr_in6 = unsafe { core::mem::zeroed() };
                s.sin6_family = libc::AF_INET6 as libc::sa_family_t;
                s.sin6_port = v6.port().to_be();
                s.sin6_addr.s6_addr = v6.ip().octets();
                (as_bytes(&s), core::mem::size_of::<libc::sockaddr_in6>())
            }
        };
        Addr::new(bytes, len as socklen_t, sa.to_string(), sa.ip().to_string())
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    pub fn host(&self) -> &str {
        &self.host
    }

    pub fn same(&self, other: &Addr) -> bool {
        self.sockaddr == other.sockaddr
    }
}

impl Clone for Addr {
    fn clone(&self) -> Addr {
        Addr::new(
            self.sockaddr.clone(),
            self.socklen,
            self.text.clone(),
            self.host.clone(),
        )
    }
}

/// The bytes of a plain C struct.
fn as_bytes<T: Copy>(v: &T) -> Vec<u8> {
    // SAFETY: `T` is a plain C struct (sockaddr_in/in6) read as its own size in bytes.
    unsafe { core::slice::from_raw_parts((v as *const T).cast::<u8>(), core::mem::size_of::<T>()) }
        .to_vec()
}

/// How a connect attempt went.
pub enum Connect {
    /// Connected at once (a local socket can be).
    Done,
    /// Under way: the write event (or the read event) says when it is done.
    InProgress,
    Failed(io::Error),
}

/// How a send or recv went.
pub enum Io {
    Done(usize),
    /// Not now: wait for the event.
    Again,
    /// The peer closed the connection (recv only).
    Closed,
    Failed(io::Error),
}

/// The connection and its log. Both live inside the owner, which never moves (it is part of a
/// zone allocated in the cycle pool), so the pointers nginx keeps into them stay valid.
pub struct Peer {
    pc: ngx_peer_connection_t,
    log: Box<ngx_log_t>,
}

impl Default for Peer {
    fn default() -> Self {
        // SAFETY: an all-zero ngx_peer_connection_t and ngx_log_t are the C "unset" values.
        let (pc, log) = unsafe { (core::mem::zeroed(), core::mem::zeroed()) };
        Peer {
            pc,
            log: Box::new(log),
        }
    }
}

impl Peer {
    fn conn(&mut self) -> Option<&mut ngx_connection_t> {
        // SAFETY: pc.connection is either null or the live connection nginx gave us.
        unsafe { self.pc.connection.as_mut() }
    }

    fn conn_ref(&self) -> Option<&ngx_connection_t> {
        // SAFETY: as above.
        unsafe { self.pc.connection.as_ref() }
    }

    /// Starts connecting to `addr`. `owner` becomes the connection's `data`; `read` and
    /// `write` are called by the event loop with the connection's events.
    ///
    /// # Safety
    /// `addr` and `owner` must outlive the connection; must run in a worker's event loop.
    pub unsafe fn connect(
        &mut self,
        addr: &Addr,
        owner: *mut c_void,
        read: ngx_event_handler_pt,
        write: ngx_event_handler_pt,
    ) -> Connect {
        self.close();
        // A copy of the cycle's log, so log lines about this connection go where nginx's go.
        // nginx's own error lines about this connection ("connect() failed", an SSL alert
        // logged as crit) are capped at alert: the client writes one line per failure burst,
        // with the reason, instead of one per attempt.
        // SAFETY: the cycle's log is a live ngx_log_t for the whole life of the worker.
        *self.log = unsafe { *crate::log::cycle_log() };
        self.log.log_level = self.log.log_level.min(NGX_LOG_ALERT as usize);
        self.log.handler = None;
        self.log.data = ptr::null_mut();
        self.log.action = ptr::null_mut();
        // SAFETY: an all-zero ngx_peer_connection_t is the C "unset" value.
        self.pc = unsafe { core::mem::zeroed() };
        self.pc.sockaddr = addr.sockaddr.as_ptr() as *mut _;
        self.pc.socklen = addr.socklen;
        self.pc.name = &addr.name as *const ngx_str_t as *mut ngx_str_t;
        self.pc.get = Some(ngx_event_get_peer);
        self.pc.tries = 1;
        self.pc.log = &mut *self.log;
        self.pc
            .set_log_error(ngx_connection_log_error_e_NGX_ERROR_INFO);

        // SAFETY: a filled-in peer connection whose address and log outlive it (see above).
        let rc = unsafe { ngx_event_connect_peer(&mut self.pc) };
        let errno = io::Error::last_os_error();
        if rc != NGX_OK as ngx_int_t && rc != NGX_AGAIN as ngx_int_t {
            // ngx_event_connect_peer closed the socket itself.
            self.pc.connection = ptr::null_mut();
            return Connect::Failed(match errno.raw_os_error() {
                Some(0) | None => io::Error::other("cannot connect"),
                _ => errno,
            });
        }
        let Some(c) = self.conn() else {
            return Connect::Failed(io::Error::other("no connection"));
        };
        c.data = owner;
        // A pool of the connection's own: nginx's SSL layer allocates its state and buffers
        // from it; it goes with the connection (close).
        // SAFETY: the log lives in the Peer for as long as the connection.
        c.pool = unsafe { ngx_create_pool(1024, c.log) };
        if c.pool.is_null() {
            self.close();
            return Connect::Failed(io::Error::other("out of memory"));
        }
        // SAFETY: a connection from ngx_event_connect_peer has its read and write events.
        unsafe {
            (*c.read).handler = read;
            (*c.write).handler = write;
        }
        if rc == NGX_OK as ngx_int_t {
            self.nodelay();
            Connect::Done
        } else {
            Connect::InProgress
        }
    }

    /// After an in-progress connect signalled: whether it succeeded.
    pub fn connect_result(&mut self) -> Result<(), io::Error> {
        let Some(c) = self.conn() else {
            return Err(io::Error::new(io::ErrorKind::NotConnected, "not connected"));
        };
        let mut err: core::ffi::c_int = 0;
        let mut len = core::mem::size_of::<core::ffi::c_int>() as socklen_t;
        // SAFETY: a valid socket and out-parameters of the right size.
        let rc = unsafe {
            getsockopt(
                c.fd,
                SOL_SOCKET as _,
                SO_ERROR as _,
                &mut err as *mut _ as *mut c_void,
                &mut len,
            )
        };
        if rc == -1 {
            return Err(io::Error::last_os_error());
        }
        if err != 0 {
            return Err(io::Error::from_raw_os_error(err));
        }
        self.nodelay();
        Ok(())
    }

    /// Small pipelined commands must not wait for the peer's delayed ACK (Nagle).
    fn nodelay(&mut self) {
        if let Some(c) = self.conn() {
            // SAFETY: a live connection.
            unsafe { ngx_tcp_nodelay(c) };
        }
    }

    pub fn send(&mut self, buf: &[u8]) -> Io {
        let Some(c) = self.conn() else {
            return Io::Failed(io::Error::new(io::ErrorKind::NotConnected, "not connected"));
        };
        let Some(send) = c.send else {
            return Io::Failed(io::Error::other("no send function"));
        };
        // SAFETY: a live connection and a valid buffer.
        let n = unsafe { send(c, buf.as_ptr() as *mut u8, buf.len()) };
        if n > 0 {
            Io::Done(n as usize)
        } else if n == NGX_AGAIN as isize || n == 0 {
            Io::Again
        } else {
            Io::Failed(io::Error::other("send() failed"))
        }
    }

    pub fn recv(&mut self, buf: &mut [u8]) -> Io {
        let Some(c) = self.conn() else {
            return Io::Failed(io::Error::new(io::ErrorKind::NotConnected, "not connected"));
        };
        let Some(recv) = c.recv else {
            return Io::Failed(io::Error::other("no recv function"));
        };
        // SAFETY: a live connection and a valid buffer.
        let n = unsafe { recv(c, buf.as_mut_ptr(), buf.len()) };
        if n > 0 {
            Io::Done(n as usize)
        } else if n == 0 {
            Io::Closed
        } else if n == NGX_AGAIN as isize {
            Io::Again
        } else if !c.ssl.is_null() {
            // nginx's SSL layer read the reason (it is below this connection's log level).
            Io::Failed(io::Error::other(
                "TLS read failed (the server ended the session: e.g. it wants a client \
                 certificate, redis_tls_cert=)",
            ))
        } else {
            let e = io::Error::last_os_error();
            Io::Failed(match e.raw_os_error() {
                Some(0) | None => io::Error::other("recv() failed"),
                _ => e,
            })
        }
    }

    /// Whether the last recv left data unread (a short read means the socket is drained).
    pub fn read_ready(&self) -> bool {
        self.conn_ref()
            // SAFETY: a live connection has valid events.
            .map(|c| unsafe { (*c.read).ready() } != 0)
            .unwrap_or(false)
    }

    /// Asks for the next read event (needed with level-triggered event methods).
    pub fn wait_read(&mut self) -> Result<(), ()> {
        let Some(c) = self.conn() else { return Err(()) };
        // SAFETY: a live connection.
        let rc = unsafe { ngx_handle_read_event(c.read, 0) };
        (rc == NGX_OK as ngx_int_t).then_some(()).ok_or(())
    }

    /// Asks for the next write event.
    pub fn wait_write(&mut self) -> Result<(), ()> {
        let Some(c) = self.conn() else { return Err(()) };
        // SAFETY: a live connection.
        let rc = unsafe { ngx_handle_write_event(c.write, 0) };
        (rc == NGX_OK as ngx_int_t).then_some(()).ok_or(())
    }

    fn read_event(&self) -> Option<*mut ngx_event_t> {
        self.conn_ref().map(|c| c.read).filter(|e| !e.is_null())
    }

    /// (Re)arms the timer on the read event to fire in `ms`. Exact: the old timer is removed
    /// first (nginx would keep an old one within 300 ms of the new one).
    pub fn set_timer(&mut self, ms: u64) {
        if let Some(ev) = self.read_event() {
            // SAFETY: a live connection's read event.
            unsafe {
                if (*ev).timer_set() != 0 {
                    ngx_del_timer(ev);
                }
                (*ev).set_timedout(0);
                ngx_add_timer(ev, ms.clamp(1, 3_600_000) as _);
            }
        }
    }

    pub fn clear_timer(&mut self) {
        if let Some(ev) = self.read_event() {
            // SAFETY: a live connection's read event.
            unsafe {
                if (*ev).timer_set() != 0 {
                    ngx_del_timer(ev);
                }
                (*ev).set_timedout(0);
            }
        }
    }

    pub fn timer_set(&self) -> bool {
        // SAFETY: a live connection's read event.
        self.read_event()
            .map(|ev| unsafe { (*ev).timer_set() } != 0)
            .unwrap_or(false)
    }

    /// Marks the connection idle (nothing in flight): nginx closes idle connections when a
    /// worker shuts down gracefully, by calling the read handler with `close` set.
    pub fn set_idle(&mut self, idle: bool) {
        if let Some(c) = self.conn() {
            c.set_idle(u32::from(idle));
        }
    }

    /// nginx asks to close the connection (graceful shutdown of the worker).
    pub fn close_requested(&self) -> bool {
        self.conn_ref().map(|c| c.close() != 0).unwrap_or(false)
    }

    pub fn close(&mut self) {
        if let Some(c) = self.conn() {
            let pool = c.pool;
            if !c.ssl.is_null() {
                // Without waiting for the peer's close_notify (as nginx closes upstreams).
                // SAFETY: the connection's SSL state, set by ngx_ssl_create_connection.
                unsafe {
                    (*c.ssl).set_no_wait_shutdown(1);
                    ngx::ffi::ngx_ssl_shutdown(c);
                }
            }
            // SAFETY: the connection is ours; ngx_close_connection deletes its timers and
            // posted events and frees it (not its pool: destroyed next, with the SSL state).
            unsafe { ngx_close_connection(c) };
            if !pool.is_null() {
                // SAFETY: the pool connect() made for this connection, now closed.
                unsafe { ngx_destroy_pool(pool) };
            }
        }
        self.pc.connection = ptr::null_mut();
    }

    /// The live connection, for the TLS layer.
    pub fn connection(&mut self) -> Option<&mut ngx_connection_t> {
        self.conn()
    }

    /// Points the connection's event handlers at the owner's again (after a TLS handshake,
    /// during which nginx's SSL code had them).
    pub fn set_handlers(&mut self, read: ngx_event_handler_pt, write: ngx_event_handler_pt) {
        if let Some(c) = self.conn() {
            // SAFETY: a live connection has its read and write events.
            unsafe {
                (*c.read).handler = read;
                (*c.write).handler = write;
            }
        }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        self.close();
    }
}
