//! A client's configuration, built at configuration time from a zone's Redis parameters:
//! the route, TLS, the AUTH command (the password read from its file), the scripts to load.

use ngx::ffi::{ngx_conf_full_name, ngx_conf_t, ngx_str_t};
use smart_limit_core::redis::params::{HostPort, RedisParams};
use smart_limit_core::redis::version::{self, Requirement};
use smart_limit_core::redis::{self, BACKOFF_FIRST_MS, BACKOFF_MAX_MS};

use crate::net::peer::Addr;
use crate::net::tls::Tls;
use crate::net::NetError;

use super::*;

/// Everything a client needs, made at configuration time from the zone's parameters.
pub struct ClientConfig {
    pub route: Route,
    /// `AUTH [user] password` (the only copy of the secret; never logged), first on every
    /// new data connection when configured: an error reply fails the connection.
    pub auth: Option<Vec<u8>>,
    /// `SCRIPT LOAD` of the zone's script(s), next (their replies are not needed: a server
    /// that refuses them answers the scripts' calls with the reason, which their callers log).
    pub scripts: Vec<Vec<u8>>,
    /// The lowest server version this client works with, and why: checked with `INFO server`
    /// on every new data connection, before the scripts go out.
    pub needs: Requirement,
    pub tls: Option<Tls>,
    pub timeout_ms: u64,
    /// Start of log lines, e.g. `smart_limit zone "shop": redis 127.0.0.1:6379`.
    pub label: String,
    /// What decisions do meanwhile, for the log line, e.g. `on_error=local`.
    pub policy: String,
    /// Longest wait before a new connection is tried after failures (the backoff's cap).
    pub retry_max_ms: u64,
}

/// Why a Redis client's configuration was refused (the message names the parameter; it never
/// quotes the password file's content).
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{what}={text}: {source}")]
    Address {
        /// The parameter (`redis`, `sentinel`).
        what: &'static str,
        /// The address as written.
        text: String,
        source: NetError,
    },
    /// The TLS context (or memory for it).
    #[error(transparent)]
    Net(#[from] NetError),
    #[error("redis_password_file=\"{0}\": bad file name")]
    PasswordFileName(String),
    #[error("redis_password_file=\"{path}\": cannot read it: {source}")]
    PasswordFile {
        path: String,
        source: std::io::Error,
    },
    #[error("redis_password_file=\"{0}\": the first line (the password) is empty")]
    EmptyPassword(String),
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
    ) -> Result<ClientConfig, ConfigError> {
        let resolve = |cf: &mut ngx_conf_t, what: &'static str, list: &[HostPort]| {
            list.iter()
                .map(|h| {
                    Addr::resolve(cf, &h.text).map_err(|source| ConfigError::Address {
                        what,
                        text: h.text.clone(),
                        source,
                    })
                })
                .collect::<Result<Vec<Addr>, ConfigError>>()
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
        let needs = requirement(p, &scripts);
        Ok(ClientConfig {
            route,
            auth,
            scripts,
            needs,
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

/// What the server must be for this client: the floor of the scripts (raised by a script that
/// uses a late option, such as the synced room's `ZADD ... GT`), an ACL user, TLS.
fn requirement(p: &RedisParams, scripts: &[Vec<u8>]) -> Requirement {
    let mut needs = scripts
        .iter()
        .map(|s| version::script_needs(s))
        .fold(version::NEEDS_SCRIPTS, Requirement::max);
    if p.user.is_some() {
        needs = needs.max(version::NEEDS_ACL_USER);
    }
    if p.tls {
        needs = needs.max(version::NEEDS_TLS);
    }
    needs
}

/// `AUTH [user] password` from `redis_password_file=` (its first line; relative to the
/// configuration's prefix, as nginx's own files). The error never quotes the file's content.
fn auth_command(
    cf: &mut ngx_conf_t,
    user: Option<&str>,
    file: &str,
) -> Result<Vec<u8>, ConfigError> {
    // SAFETY: the configuration's pool is live while it is parsed.
    let mut name = unsafe { ngx_str_t::from_bytes(cf.pool, file.as_bytes()) }
        .ok_or(ConfigError::Net(NetError::NoMemory))?;
    // SAFETY: the cycle being configured; nginx may replace `name` with a pool string.
    if unsafe { ngx_conf_full_name(cf.cycle, &mut name, 1) } != 0 {
        return Err(ConfigError::PasswordFileName(file.to_string()));
    }
    let path = name.to_string();
    let text = std::fs::read_to_string(&path).map_err(|source| ConfigError::PasswordFile {
        path: path.clone(),
        source,
    })?;
    let password = text.lines().next().unwrap_or("").trim_end_matches('\r');
    if password.is_empty() {
        return Err(ConfigError::EmptyPassword(path));
    }
    Ok(redis::auth_command(user, password))
}
