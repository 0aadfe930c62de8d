//! A minimal HTTP/1.1 client over one keep-alive `TcpStream`: GET only, bodies framed by
//! Content-Length, chunked transfer coding, or connection close. Optional source address
//! (bind before connect) so each simulated browser can have its own 127/8 client address.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream};
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};

use crate::args::Target;

/// Longest status line, header line or chunk-size line accepted.
const MAX_LINE: u64 = 16 * 1024;
/// Most header lines accepted in one response.
const MAX_HEADERS: usize = 200;

pub struct Response {
    pub status: u16,
    pub set_cookies: Vec<String>,
    /// The `Location` header, when there is one.
    pub location: Option<String>,
    pub body_bytes: u64,
    /// The body's first [`BODY_KEPT`] bytes (of a body framed by Content-Length).
    pub body: Vec<u8>,
}

/// Bytes of a body kept in [`Response::body`] (a waiting room's JSON answer fits).
pub const BODY_KEPT: u64 = 64 * 1024;

/// Answer headers beyond [`Response`]'s, for callers that tell a waiting room's answer from
/// the origin's (see [`Client::get_meta`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Meta {
    /// The `Retry-After` header, when there is one (a waiting room's answer carries it).
    pub retry_after: Option<String>,
    /// The `Cache-Control` header, when there is one.
    pub cache_control: Option<String>,
}

pub struct Client<'a> {
    target: &'a Target,
    source: Option<Ipv4Addr>,
    timeout: Duration,
    conn: Option<BufReader<TcpStream>>,
    /// Connections opened so far (for the report).
    pub connects: u64,
}

/// A failed attempt; `retryable` when nothing of a response arrived on a reused
/// connection (the server closed an idle keep-alive connection under us).
struct Failure {
    err: io::Error,
    retryable: bool,
}

impl<'a> Client<'a> {
    pub fn new(target: &'a Target, source: Option<Ipv4Addr>, timeout: Duration) -> Self {
        Client {
            target,
            source,
            timeout,
            conn: None,
            connects: 0,
        }
    }

    /// GET `path`. One silent retry on a fresh connection when a reused connection turns
    /// out to be closed before any byte of the answer, as browsers do.
    pub fn get(&mut self, path: &str, accept: &str, cookie: Option<&str>) -> io::Result<Response> {
        self.get_with(path, accept, cookie, &[])
    }

    /// [`Client::get`] with more request headers.
    pub fn get_with(
        &mut self,
        path: &str,
        accept: &str,
        cookie: Option<&str>,
        headers: &[(&str, &str)],
    ) -> io::Result<Response> {
        self.get_meta(path, accept, cookie, headers).map(|(r, _)| r)
    }

    /// [`Client::get_with`], also returning the answer's [`Meta`] headers.
    pub fn get_meta(
        &mut self,
        path: &str,
        accept: &str,
        cookie: Option<&str>,
        headers: &[(&str, &str)],
    ) -> io::Result<(Response, Meta)> {
        let mut req = format!(
            "GET {path} HTTP/1.1\r\nHost: {}\r\nUser-Agent: smart-limit-bench/0.1\r\n\
             Accept: {accept}\r\nConnection: keep-alive\r\n",
            self.target.host_header
        );
        if let Some(c) = cookie {
            req.push_str("Cookie: ");
            req.push_str(c);
            req.push_str("\r\n");
        }
        for (name, value) in headers {
            req.push_str(&format!("{name}: {value}\r\n"));
        }
        req.push_str("\r\n");

        let reused = self.conn.is_some();
        match self.attempt(req.as_bytes()) {
            Ok(r) => Ok(r),
            Err(f) if reused && f.retryable => self.attempt(req.as_bytes()).map_err(|f| f.err),
            Err(f) => Err(f.err),
        }
    }

    fn attempt(&mut self, req: &[u8]) -> Result<(Response, Meta), Failure> {
        if self.conn.is_none() {
            let stream = self.connect().map_err(|err| Failure {
                err,
                retryable: false,
            })?;
            self.connects += 1;
            self.conn = Some(BufReader::with_capacity(16 * 1024, stream));
        }
        let conn = self.conn.as_mut().expect("connection just set");
        let result = exchange(conn, req);
        match &result {
            Ok((_, _, keep)) if *keep => {}
            _ => self.conn = None,
        }
        result.map(|(r, m, _)| (r, m))
    }

    fn connect(&self) -> io::Result<TcpStream> {
        let stream = match (self.source, self.target.addr) {
            (Some(src), SocketAddr::V4(dst)) => connect_from(src, dst, self.timeout)?,
            (Some(_), SocketAddr::V6(_)) => {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    "source IPv4 to IPv6 target",
                ))
            }
            (None, dst) => TcpStream::connect_timeout(&dst, self.timeout)?,
        };
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(self.timeout))?;
        stream.set_write_timeout(Some(self.timeout))?;
        Ok(stream)
    }
}

/// Sends one request and reads its whole answer. Returns the response, its [`Meta`]
/// headers and whether the connection may be reused.
fn exchange(
    conn: &mut BufReader<TcpStream>,
    req: &[u8],
) -> Result<(Response, Meta, bool), Failure> {
    let early = |err: io::Error| Failure {
        err,
        retryable: true,
    };
    let late = |err: io::Error| Failure {
        err,
        retryable: false,
    };

    conn.get_mut().write_all(req).map_err(early)?;

    // Status line (skipping any 1xx interim answer).
    let (status, minor) = loop {
        let line = read_line(conn).map_err(early)?;
        if line.is_empty() {
            return Err(early(eof("connection closed before the status line")));
        }
        let (status, minor) = parse_status_line(&line).map_err(late)?;
        if (100..200).contains(&status) && status != 101 {
            read_headers(conn).map_err(late)?;
            continue;
        }
        break (status, minor);
    };

    let headers = read_headers(conn).map_err(late)?;
    let mut content_length: Option<u64> = None;
    let mut chunked = false;
    let mut keep_alive = minor >= 1;
    let mut set_cookies = Vec::new();
    let mut location = None;
    let mut meta = Meta::default();
    for (name, value) in &headers {
        match name.to_ascii_lowercase().as_str() {
            "content-length" => {
                let n = value
                    .trim()
                    .parse::<u64>()
                    .map_err(|_| late(invalid(format!("bad Content-Length {value:?}"))))?;
                content_length = Some(n);
            }
            "transfer-encoding" => {
                chunked = value
                    .rsplit(',')
                    .next()
                    .map(|last| last.trim().eq_ignore_ascii_case("chunked"))
                    .unwrap_or(false);
            }
            "connection" => {
                for token in value.split(',').map(str::trim) {
                    if token.eq_ignore_ascii_case("close") {
                        keep_alive = false;
                    } else if token.eq_ignore_ascii_case("keep-alive") {
                        keep_alive = true;
                    }
                }
            }
            "set-cookie" => set_cookies.push(value.clone()),
            "location" => location = Some(value.trim().to_string()),
            "retry-after" => meta.retry_after = Some(value.trim().to_string()),
            "cache-control" => meta.cache_control = Some(value.trim().to_string()),
            _ => {}
        }
    }

    let mut body = Vec::new();
    let body_bytes = if status == 204 || status == 304 {
        0
    } else if chunked {
        read_chunked(conn).map_err(late)?
    } else if let Some(n) = content_length {
        let kept = io::copy(&mut conn.by_ref().take(n.min(BODY_KEPT)), &mut body).map_err(late)?;
        let rest = n - kept;
        let got = kept + io::copy(&mut conn.by_ref().take(rest), &mut io::sink()).map_err(late)?;
        if got != n {
            return Err(late(eof("body shorter than Content-Length")));
        }
        n
    } else {
        // Delimited by the end of the connection.
        keep_alive = false;
        io::copy(conn, &mut io::sink()).map_err(late)?
    };

    Ok((
        Response {
            status,
            set_cookies,
            location,
            body_bytes,
            body,
        },
        meta,
        keep_alive,
    ))
}

fn read_chunked(conn: &mut BufReader<TcpStream>) -> io::Result<u64> {
    let mut total = 0u64;
    loop {
        let line = read_line(conn)?;
        if line.is_empty() {
            return Err(eof("connection closed inside a chunked body"));
        }
        let size_text = line.split(';').next().unwrap_or("").trim();
        let size = u64::from_str_radix(size_text, 16)
            .map_err(|_| invalid(format!("bad chunk size {size_text:?}")))?;
        if size == 0 {
            read_headers(conn)?; // trailer section, up to the empty line
            return Ok(total);
        }
        let got = io::copy(&mut conn.by_ref().take(size), &mut io::sink())?;
        if got != size {
            return Err(eof("connection closed inside a chunk"));
        }
        total += size;
        if !read_line(conn)?.is_empty() {
            // The CRLF after the chunk data reads as an empty line.
            return Err(invalid("chunk data not followed by CRLF".into()));
        }
    }
}

/// Reads header lines up to the empty line.
fn read_headers(conn: &mut BufReader<TcpStream>) -> io::Result<Vec<(String, String)>> {
    let mut headers = Vec::new();
    loop {
        let mut raw = Vec::new();
        let n = conn.by_ref().take(MAX_LINE).read_until(b'\n', &mut raw)?;
        if n == 0 {
            return Err(eof("connection closed inside the headers"));
        }
        if raw.last() != Some(&b'\n') {
            return Err(invalid("header line too long".into()));
        }
        let line = String::from_utf8_lossy(&raw);
        let line = line.trim_end_matches(['\r', '\n']);
        if line.is_empty() {
            return Ok(headers);
        }
        if headers.len() >= MAX_HEADERS {
            return Err(invalid("too many header lines".into()));
        }
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| invalid(format!("malformed header line {line:?}")))?;
        headers.push((name.trim().to_string(), value.trim().to_string()));
    }
}

/// Reads one line without its CRLF; "" at end of stream. (An empty line in the middle of
/// a stream also reads as "", callers know which one they expect.)
fn read_line(conn: &mut BufReader<TcpStream>) -> io::Result<String> {
    let mut raw = Vec::new();
    let n = conn.by_ref().take(MAX_LINE).read_until(b'\n', &mut raw)?;
    if n > 0 && raw.last() != Some(&b'\n') {
        if n as u64 == MAX_LINE {
            return Err(invalid("line too long".into()));
        }
        return Err(eof("connection closed inside a line"));
    }
    let line = String::from_utf8_lossy(&raw);
    Ok(line.trim_end_matches(['\r', '\n']).to_string())
}

/// "HTTP/1.1 200 OK" -> (200, 1)
fn parse_status_line(line: &str) -> io::Result<(u16, u8)> {
    let bad = || invalid(format!("bad status line {line:?}"));
    let rest = line.strip_prefix("HTTP/1.").ok_or_else(bad)?;
    let mut parts = rest.splitn(3, ' ');
    let minor = parts
        .next()
        .and_then(|m| m.parse::<u8>().ok())
        .ok_or_else(bad)?;
    let status = parts
        .next()
        .filter(|s| s.len() == 3)
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(bad)?;
    Ok((status, minor))
}

fn eof(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, msg)
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

/// Opens a TCP connection from `src` (any port) to `dst`, within `timeout` (std cannot bind
/// before connect; socket2 can, and its sockets are close-on-exec).
fn connect_from(src: Ipv4Addr, dst: SocketAddrV4, timeout: Duration) -> io::Result<TcpStream> {
    let socket = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP))?;
    port_at_connect(&socket);
    socket
        .bind(&SocketAddrV4::new(src, 0).into())
        .map_err(|e| io::Error::new(e.kind(), format!("bind {src}: {e}")))?;
    socket
        .connect_timeout(&SocketAddr::V4(dst).into(), timeout)
        .map_err(|e| io::Error::new(e.kind(), format!("connect {dst} from {src}: {e}")))?;
    Ok(socket.into())
}

/// Lets connect() pick the source port (`IP_BIND_ADDRESS_NO_PORT`), so many connections from
/// one source address do not exhaust bind()'s port range. Best effort: older kernels lack the
/// option, and socket2 has no setter for it.
fn port_at_connect(socket: &Socket) {
    use std::os::fd::AsRawFd;
    let one: libc::c_int = 1;
    // SAFETY: a valid descriptor, a pointer to a c_int option value and its length.
    unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_BIND_ADDRESS_NO_PORT,
            std::ptr::from_ref(&one).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::thread;

    fn target(addr: SocketAddr) -> Target {
        Target {
            host_header: addr.to_string(),
            addr,
            base: String::new(),
            url: String::new(),
        }
    }

    /// Serves the given raw answers, one per request, on one connection per element of
    /// `conns`; returns the requests it saw.
    fn serve(conns: Vec<Vec<&'static str>>) -> (SocketAddr, thread::JoinHandle<Vec<String>>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let h = thread::spawn(move || {
            let mut seen = Vec::new();
            for answers in conns {
                let (s, peer) = l.accept().unwrap();
                let mut r = BufReader::new(s.try_clone().unwrap());
                let mut w = s;
                for a in answers {
                    let mut req = format!("peer={}\n", peer.ip());
                    loop {
                        let mut line = String::new();
                        r.read_line(&mut line).unwrap();
                        if line == "\r\n" || line.is_empty() {
                            break;
                        }
                        req.push_str(&line);
                    }
                    seen.push(req);
                    w.write_all(a.as_bytes()).unwrap();
                }
            }
            seen
        });
        (addr, h)
    }

    #[test]
    fn keep_alive_lengths_chunked_and_close() {
        let (addr, h) = serve(vec![
            vec![
                "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nSet-Cookie: a=1; Path=/\r\n\r\nhello",
                "HTTP/1.1 503 Busy\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n2\r\nde\r\n0\r\nT: 1\r\n\r\n",
                "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
            ],
            vec!["HTTP/1.0 200 OK\r\n\r\nuntil close"],
        ]);
        let t = target(addr);
        let mut c = Client::new(&t, None, Duration::from_secs(5));
        let r = c.get("/", "text/html", None).unwrap();
        assert_eq!((r.status, r.body_bytes), (200, 5));
        assert_eq!(r.set_cookies, ["a=1; Path=/"]);
        let r = c.get("/a.css", "*/*", Some("a=1")).unwrap();
        assert_eq!((r.status, r.body_bytes), (503, 5));
        let r = c.get("/b.js", "*/*", Some("a=1")).unwrap();
        assert_eq!((r.status, r.body_bytes), (200, 2));
        assert!(c.conn.is_none());
        let r = c.get("/c", "*/*", None).unwrap();
        assert_eq!((r.status, r.body_bytes), (200, 11));
        assert_eq!(c.connects, 2);
        let seen = h.join().unwrap();
        assert!(seen[1].contains("Cookie: a=1\r\n"));
        assert!(seen[0].starts_with("peer=127.0.0.1\nGET / HTTP/1.1\r\n"));
    }

    #[test]
    fn meta_headers_of_a_waiting_answer() {
        let (addr, h) = serve(vec![vec![
            "HTTP/1.1 503 Busy\r\nretry-after:  5 \r\nCache-Control: no-store\r\nContent-Length: 4\r\n\r\nwait",
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
        ]]);
        let t = target(addr);
        let mut c = Client::new(&t, None, Duration::from_secs(5));
        let (r, m) = c
            .get_meta("/", "text/html", None, &[("Sec-Fetch-Mode", "navigate")])
            .unwrap();
        assert_eq!((r.status, r.body.as_slice()), (503, &b"wait"[..]));
        assert_eq!(m.retry_after.as_deref(), Some("5"));
        assert_eq!(m.cache_control.as_deref(), Some("no-store"));
        let (r, m) = c.get_meta("/", "text/html", None, &[]).unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(m, Meta::default());
        assert!(h.join().unwrap()[0].contains("Sec-Fetch-Mode: navigate\r\n"));
    }

    #[test]
    fn retries_once_when_idle_connection_was_closed() {
        // First connection answers one request then closes without saying so.
        let (addr, h) = serve(vec![
            vec!["HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"],
            vec!["HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"],
        ]);
        let t = target(addr);
        let mut c = Client::new(&t, None, Duration::from_secs(5));
        assert_eq!(c.get("/", "*/*", None).unwrap().status, 200);
        thread::sleep(Duration::from_millis(50));
        assert_eq!(c.get("/", "*/*", None).unwrap().status, 200);
        assert_eq!(c.connects, 2);
        h.join().unwrap();
    }

    #[test]
    fn binds_the_source_address() {
        let (addr, h) = serve(vec![vec!["HTTP/1.1 204 No Content\r\n\r\n"]]);
        let t = target(addr);
        let src = Ipv4Addr::new(127, 0, 0, 42);
        let mut c = Client::new(&t, Some(src), Duration::from_secs(5));
        assert_eq!(c.get("/", "*/*", None).unwrap().status, 204);
        assert!(h.join().unwrap()[0].starts_with("peer=127.0.0.42\n"));
    }

    #[test]
    fn status_lines() {
        assert_eq!(parse_status_line("HTTP/1.1 200 OK").unwrap(), (200, 1));
        assert_eq!(parse_status_line("HTTP/1.0 503").unwrap(), (503, 0));
        assert!(parse_status_line("HTTP/2 200").is_err());
        assert!(parse_status_line("HTTP/1.1 20 OK").is_err());
    }
}
