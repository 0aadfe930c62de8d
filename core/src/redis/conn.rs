//! A connection's own commands and rules: AUTH, ASKING, the Sentinel's master query, Cluster
//! redirections and hash tags, and the reconnect backoff.

use std::net::{IpAddr, SocketAddr};

use super::resp::Value;

/// The Redis Cluster hash tag of a key: the text between the first `{` and the next `}`.
pub fn hash_tag(key: &str) -> Option<&str> {
    let open = key.find('{')?;
    let rest = &key[open + 1..];
    let close = rest.find('}')?;
    (close > 0).then(|| &rest[..close])
}

/// `AUTH [user] password`: an ACL user (Redis 6+), or the `requirepass` password alone.
pub fn auth_command(user: Option<&str>, password: &str) -> Vec<u8> {
    let mut cmd = ::redis::cmd("AUTH");
    if let Some(u) = user {
        cmd.arg(u);
    }
    cmd.arg(password);
    cmd.get_packed_command()
}

/// `ASKING`, sent before a command a cluster node redirected with `ASK`.
pub fn asking_command() -> Vec<u8> {
    ::redis::cmd("ASKING").get_packed_command()
}

/// `SENTINEL get-master-addr-by-name NAME`.
pub fn master_query(master: &str) -> Vec<u8> {
    ::redis::cmd("SENTINEL")
        .arg("get-master-addr-by-name")
        .arg(master)
        .get_packed_command()
}

/// The node of a cluster redirection, `MOVED <slot> <ip>:<port>` or `ASK <slot> <ip>:<port>`
/// (`prefix` is `b"MOVED "` or `b"ASK "`, the error reply's text follows it). Numeric
/// addresses only, which is what a cluster announces by default: the module resolves no
/// names at run time.
pub fn redirection(error: &[u8], prefix: &[u8]) -> Option<SocketAddr> {
    let rest = error.strip_prefix(prefix)?;
    let text = core::str::from_utf8(rest).ok()?;
    let (slot, node) = text.trim().split_once(' ')?;
    slot.parse::<u16>().ok()?;
    let (host, port) = node.rsplit_once(':')?;
    let ip: IpAddr = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .ok()?;
    Some(SocketAddr::new(ip, port.parse().ok()?))
}

/// A Sentinel's answer to [`master_query`]: `[ip, port]` (nil when it does not know the
/// master).
pub fn master_address(v: &Value) -> Option<SocketAddr> {
    let Value::Array(items) = v else { return None };
    let [Value::Bulk(ip), Value::Bulk(port)] = items.as_slice() else {
        return None;
    };
    let ip: IpAddr = core::str::from_utf8(ip).ok()?.parse().ok()?;
    let port: u16 = core::str::from_utf8(port).ok()?.parse().ok()?;
    Some(SocketAddr::new(ip, port))
}

/// Reconnect delays: from `first_ms`, doubling up to `max_ms`, back to the start after a
/// success. A failed connection is not retried before its delay is over; the decisions in
/// between take the failure policy at once instead of waiting for a timeout each.
#[derive(Debug, Clone, Copy)]
pub struct Backoff {
    first_ms: u64,
    max_ms: u64,
    next_ms: u64,
    /// No new connection before this time (unix ms).
    pub retry_at: u64,
}

/// First and largest delay before reconnecting to Redis after a failure.
pub const BACKOFF_FIRST_MS: u64 = 100;
pub const BACKOFF_MAX_MS: u64 = 3_000;

impl Backoff {
    pub const fn new(first_ms: u64, max_ms: u64) -> Backoff {
        Backoff {
            first_ms,
            max_ms,
            next_ms: first_ms,
            retry_at: 0,
        }
    }

    /// A failure at `now`: returns the delay before the next attempt.
    pub fn failed(&mut self, now: u64) -> u64 {
        let delay = self.next_ms;
        self.retry_at = now.saturating_add(delay);
        self.next_ms = (self.next_ms.saturating_mul(2)).min(self.max_ms);
        delay
    }

    pub fn succeeded(&mut self) {
        self.next_ms = self.first_ms;
        self.retry_at = 0;
    }

    pub fn may_try(&self, now: u64) -> bool {
        now >= self.retry_at
    }
}
