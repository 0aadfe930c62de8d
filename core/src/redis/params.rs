//! How to reach Redis, as operators run it ([S17]): the connection parameters that
//! `smart_limit_zone ... store=redis` and `smart_limit_rate_zone` share.
//!
//! - `redis=HOST:PORT[,HOST:PORT...]`: one server, or seeds of a Redis Cluster (the client
//!   follows `MOVED`/`ASK` to the node that holds the room's slot);
//! - `redis_user=NAME`, `redis_password_file=FILE`: `AUTH` (an ACL user on Redis 6+, or the
//!   `requirepass` password alone); the password is read from the file by the module at
//!   configuration time and never written anywhere;
//! - `redis_tls=on`, `redis_tls_ca=FILE` (verification on whenever a CA is given),
//!   `redis_tls_name=NAME` (SNI and the name the certificate must carry),
//!   `redis_tls_cert=FILE` / `redis_tls_key=FILE` (a client certificate);
//! - `sentinel=HOST:PORT[,HOST:PORT...]` with `master=NAME`: the master is discovered from
//!   the Sentinels (and again after a failure), instead of `redis=`.
//!
//! Only the values are checked here; the module opens the files.

use crate::config::{parse_host_port, ConfError, ParseError};

/// One `HOST:PORT` of a list, as written and split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPort {
    pub host: String,
    pub port: u16,
    /// As written (`[::1]:6379` keeps its brackets): what the module resolves and logs.
    pub text: String,
}

/// The connection parameters; [`RedisParams::configured`] tells whether there are any.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct RedisParams {
    /// `redis=`: the server, or a cluster's seeds, in order of preference.
    pub seeds: Vec<HostPort>,
    pub user: Option<String>,
    /// `redis_password_file=`: the file's path (the module reads it).
    pub password_file: Option<String>,
    pub tls: bool,
    pub tls_ca: Option<String>,
    pub tls_name: Option<String>,
    pub tls_cert: Option<String>,
    pub tls_key: Option<String>,
    /// `sentinel=` and `master=`.
    pub sentinels: Vec<HostPort>,
    pub master: Option<String>,
}

impl core::fmt::Debug for RedisParams {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // Paths only: nothing here is a secret, but keep the shape obvious.
        f.debug_struct("RedisParams")
            .field("seeds", &self.seeds)
            .field("user", &self.user)
            .field("password_file", &self.password_file)
            .field("tls", &self.tls)
            .field("sentinels", &self.sentinels)
            .field("master", &self.master)
            .finish_non_exhaustive()
    }
}

/// The parameter names, with an example each (for "needs a value" messages).
pub const REDIS_PARAMS: &[(&str, &str)] = &[
    ("redis", "redis=127.0.0.1:6379"),
    ("redis_user", "redis_user=smart_limit"),
    (
        "redis_password_file",
        "redis_password_file=/etc/nginx/redis.pass",
    ),
    ("redis_tls", "redis_tls=on"),
    ("redis_tls_ca", "redis_tls_ca=/etc/nginx/redis-ca.pem"),
    ("redis_tls_name", "redis_tls_name=redis.example.com"),
    (
        "redis_tls_cert",
        "redis_tls_cert=/etc/nginx/redis-client.pem",
    ),
    ("redis_tls_key", "redis_tls_key=/etc/nginx/redis-client.key"),
    ("sentinel", "sentinel=10.0.0.5:26379,10.0.0.6:26379"),
    ("master", "master=mymaster"),
];

/// Most entries in a `redis=` or `sentinel=` list.
pub const MAX_HOSTS: usize = 16;

/// `HOST:PORT[,HOST:PORT...]`: at least one, at most [`MAX_HOSTS`], no duplicates.
pub fn parse_host_port_list(s: &str) -> Result<Vec<HostPort>, ParseError> {
    let mut out: Vec<HostPort> = Vec::new();
    for item in s.split(',') {
        let (host, port) = parse_host_port(item)?;
        if out.iter().any(|h| h.text == item) {
            return Err(ParseError::Twice(item.to_string()));
        }
        out.push(HostPort {
            host: host.to_string(),
            port,
            text: item.to_string(),
        });
    }
    if out.len() > MAX_HOSTS {
        return Err(ParseError::TooMany {
            max: MAX_HOSTS,
            what: "addresses",
        });
    }
    Ok(out)
}

/// A name given to Redis (ACL user, master name, TLS name): printable, no spaces or quotes.
fn plain_name(value: &str, what: &'static str) -> Result<String, ParseError> {
    let ok = !value.is_empty()
        && value.len() <= 255
        && value
            .bytes()
            .all(|b| b.is_ascii_graphic() && !matches!(b, b'"' | b'\'' | b'\\'));
    if ok {
        Ok(value.to_string())
    } else {
        Err(ParseError::PlainName(what))
    }
}

fn path(value: &str) -> Result<String, ParseError> {
    if value.is_empty() {
        return Err(ParseError::Syntax("expected a file name"));
    }
    Ok(value.to_string())
}

impl RedisParams {
    /// Whether `param` is one of these (for the directive parsers' tables).
    pub fn knows(param: &str) -> bool {
        REDIS_PARAMS.iter().any(|(k, _)| *k == param)
    }

    /// Some way to Redis is configured (`redis=` or `sentinel=`).
    pub fn configured(&self) -> bool {
        !self.seeds.is_empty() || !self.sentinels.is_empty()
    }

    /// Sets one parameter; the error is the reason only.
    pub fn set(&mut self, param: &str, value: &str) -> Result<(), ParseError> {
        match param {
            "redis" => self.seeds = parse_host_port_list(value)?,
            "redis_user" => self.user = Some(plain_name(value, "user name")?),
            "redis_password_file" => self.password_file = Some(path(value)?),
            "redis_tls" => {
                self.tls = match value {
                    "on" => true,
                    "off" => false,
                    _ => return Err(ParseError::Syntax("expected on or off")),
                }
            }
            "redis_tls_ca" => self.tls_ca = Some(path(value)?),
            "redis_tls_name" => self.tls_name = Some(plain_name(value, "host name")?),
            "redis_tls_cert" => self.tls_cert = Some(path(value)?),
            "redis_tls_key" => self.tls_key = Some(path(value)?),
            "sentinel" => self.sentinels = parse_host_port_list(value)?,
            "master" => self.master = Some(plain_name(value, "master name")?),
            _ => return Err(ParseError::Syntax("unknown parameter")),
        }
        Ok(())
    }

    /// Rules between the parameters, once all are read; `arg_of` gives the argument that set
    /// a parameter (to quote it).
    pub fn check<'a>(&self, arg_of: impl Fn(&str) -> Option<&'a str>) -> Result<(), ConfError> {
        if let (Some(r), Some(s)) = (arg_of("redis"), arg_of("sentinel")) {
            // The Sentinels name the master: a fixed address beside them would be ignored.
            return Err(ConfError::Conflict(r.to_string(), s.to_string()));
        }
        if let Some(s) = arg_of("sentinel") {
            if self.master.is_none() {
                return Err(ConfError::Requires(s.to_string(), "master=NAME"));
            }
        }
        if let (Some(m), None) = (arg_of("master"), arg_of("sentinel")) {
            return Err(ConfError::Requires(m.to_string(), "sentinel=HOST:PORT"));
        }
        if let (Some(u), None) = (arg_of("redis_user"), arg_of("redis_password_file")) {
            return Err(ConfError::Requires(
                u.to_string(),
                "redis_password_file=FILE",
            ));
        }
        if !self.tls {
            for p in [
                "redis_tls_ca",
                "redis_tls_name",
                "redis_tls_cert",
                "redis_tls_key",
            ] {
                if let Some(a) = arg_of(p) {
                    return Err(ConfError::Requires(a.to_string(), "redis_tls=on"));
                }
            }
        }
        match (arg_of("redis_tls_cert"), arg_of("redis_tls_key")) {
            (Some(c), None) => Err(ConfError::Requires(c.to_string(), "redis_tls_key=FILE")),
            (None, Some(k)) => Err(ConfError::Requires(k.to_string(), "redis_tls_cert=FILE")),
            _ => Ok(()),
        }
    }

    /// The first `redis=` or Redis-only argument, for "requires store=redis" messages.
    pub fn first_arg<'a>(arg_of: impl Fn(&str) -> Option<&'a str>) -> Option<&'a str> {
        REDIS_PARAMS.iter().find_map(|(k, _)| arg_of(k))
    }

    /// Where the module connects, for log lines: the seeds, or the Sentinels and master.
    pub fn describe(&self) -> String {
        let list = |l: &[HostPort]| {
            l.iter()
                .map(|h| h.text.as_str())
                .collect::<Vec<_>>()
                .join(",")
        };
        match &self.master {
            Some(m) if !self.sentinels.is_empty() => {
                format!("sentinel {} master {m}", list(&self.sentinels))
            }
            _ => list(&self.seeds),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<RedisParams, ConfError> {
        let mut p = RedisParams::default();
        let mut seen: Vec<(&str, &str)> = vec![];
        for a in args {
            let (k, v) = a.split_once('=').unwrap();
            p.set(k, v).map_err(|reason| ConfError::Invalid {
                param: "x",
                value: v.to_string(),
                reason,
            })?;
            seen.push((k, a));
        }
        p.check(|k| seen.iter().find(|(p, _)| *p == k).map(|(_, a)| *a))?;
        Ok(p)
    }

    #[test]
    fn lists_of_addresses() {
        let l = parse_host_port_list("10.0.0.5:6379,[::1]:7000,redis-a:6380").unwrap();
        assert_eq!(l.len(), 3);
        assert_eq!((l[1].host.as_str(), l[1].port), ("::1", 7000));
        assert_eq!(l[1].text, "[::1]:7000");
        assert!(parse_host_port_list("a:1,a:1")
            .unwrap_err()
            .to_string()
            .contains("twice"));
        assert!(parse_host_port_list("a:1,").is_err());
        assert!(parse_host_port_list("").is_err());
        let many = (1..=17)
            .map(|i| format!("h:{i}"))
            .collect::<Vec<_>>()
            .join(",");
        assert!(parse_host_port_list(&many).is_err());
    }

    #[test]
    fn combinations() {
        let p = parse(&["redis=a:1,b:2", "redis_user=u", "redis_password_file=/p"]).unwrap();
        assert!(p.configured());
        assert_eq!(p.describe(), "a:1,b:2");
        let s = parse(&["sentinel=s:26379,t:26379", "master=mymaster"]).unwrap();
        assert_eq!(s.describe(), "sentinel s:26379,t:26379 master mymaster");
        let e = |args: &[&str]| parse(args).unwrap_err().to_string();
        assert!(e(&["redis=a:1", "sentinel=s:1", "master=m"]).contains("cannot be used together"));
        assert!(e(&["sentinel=s:1"]).contains("requires master=NAME"));
        assert!(e(&["master=m"]).contains("requires sentinel="));
        assert!(e(&["redis=a:1", "redis_user=u"]).contains("requires redis_password_file="));
        assert!(e(&["redis=a:1", "redis_tls_ca=/ca"]).contains("requires redis_tls=on"));
        assert!(e(&["redis=a:1", "redis_tls=on", "redis_tls_cert=/c"])
            .contains("requires redis_tls_key="));
        assert!(e(&["redis=a:1", "redis_tls=yes"]).contains("expected on or off"));
        assert!(e(&["redis=a:1", "redis_user=a b"]).contains("no spaces"));
        assert!(parse(&[
            "redis=a:1",
            "redis_tls=on",
            "redis_tls_ca=/ca",
            "redis_tls_name=r"
        ])
        .is_ok());
    }
}
