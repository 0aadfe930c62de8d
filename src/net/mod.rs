//! Networking on nginx's event loop: a peer connection ([`peer`]) and TLS on it with nginx's
//! SSL ([`tls`]). No threads, no blocking calls: everything is driven by nginx events and
//! timers. The Redis client (`crate::redis`) is built on them.

pub mod peer;
pub mod tls;

/// Why an address or a TLS context could not be set up (configuration time), or a TLS
/// connection did not pass its checks (run time).
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    #[error("out of memory")]
    NoMemory,
    /// nginx's own reason (`ngx_parse_url`), and the address as written.
    #[error("{why} in \"{text}\"")]
    Address { why: String, text: String },
    #[error("host not found in \"{0}\"")]
    HostNotFound(String),
    #[error("no address for \"{0}\"")]
    NoAddress(String),
    #[error("cannot create an SSL context")]
    SslContext,
    #[error("cannot load redis_tls_cert \"{cert}\" / redis_tls_key \"{key}\"")]
    Certificate { cert: String, key: String },
    #[error("cannot load redis_tls_ca \"{0}\"")]
    Ca(String),
    #[error("bad redis_tls_name")]
    TlsName,
    #[error("no TLS on the connection")]
    NoTls,
    #[error("TLS handshake failed")]
    Handshake,
    /// OpenSSL's words for the verification's result.
    #[error("certificate verify failed: {0}")]
    Verify(String),
}
