//! TLS to Redis with nginx's own SSL layer, as `proxy_ssl_*` does: an SSL context made at
//! configuration time (`redis_tls=on`, `redis_tls_ca=`, `redis_tls_cert=`/`redis_tls_key=`),
//! and per connection `ngx_ssl_create_connection` + `ngx_ssl_handshake` on the peer's
//! connection, after which the connection's `recv`/`send` are nginx's SSL ones and the client
//! above does not know the difference.
//!
//! Verification is on whenever a CA is given: the chain must lead to it and the certificate
//! must carry the expected name (`redis_tls_name=`, else the host of the address: a DNS name,
//! or an IP address matched against the certificate's IP entries). OpenSSL checks both during
//! the handshake; nginx's verify callback lets a failed handshake finish, so the result is read
//! afterwards ([`Tls::verified`]). A failure is a store error with the reason, never a hang.

use core::ffi::{c_char, c_void, CStr};
use std::ffi::CString;
use std::net::IpAddr;

use ngx::core::Status;
use ngx::ffi::{
    ngx_conf_t, ngx_connection_handler_pt, ngx_connection_t, ngx_pcalloc, ngx_pool_cleanup_add,
    ngx_ssl_certificate, ngx_ssl_cleanup_ctx, ngx_ssl_create, ngx_ssl_create_connection,
    ngx_ssl_handshake, ngx_ssl_t, ngx_ssl_trusted_certificate, ngx_str_t, NGX_SSL_TLSv1_2,
    NGX_SSL_TLSv1_3, SSL_ctrl, SSL_get0_param, SSL_get_verify_result, SSL_set1_host,
    TLSEXT_NAMETYPE_host_name, X509_VERIFY_PARAM_set1_ip_asc, X509_verify_cert_error_string,
    NGX_SSL_BUFFER, NGX_SSL_CLIENT, SSL_CTRL_SET_TLSEXT_HOSTNAME, X509_V_OK,
};
use smart_limit_core::redis::params::RedisParams;

use super::NetError;

/// The SSL context of one zone's Redis connections, and what to expect of the server.
pub struct Tls {
    /// In the configuration's pool, like nginx's own: its cleanup (freeing the SSL context)
    /// runs when the pool goes, after everything else that refers to it.
    ssl: *mut ngx_ssl_t,
    /// `redis_tls_name=`: SNI and the name to verify, instead of the address's host.
    name: Option<CString>,
    verify: bool,
}

/// How a handshake went.
pub enum Handshake {
    Done,
    /// Under way: nginx calls the handler given to [`Tls::start`] when it is over.
    Again,
    Failed(String),
}

/// A file path from the configuration, as nginx wants it: in the configuration's pool, and
/// NUL-terminated after its length like every string nginx's parser makes (OpenSSL opens it).
fn conf_str(cf: &mut ngx_conf_t, text: &str) -> Result<ngx_str_t, NetError> {
    let mut bytes = text.as_bytes().to_vec();
    bytes.push(0);
    // SAFETY: the configuration's pool is live while the configuration is parsed.
    let mut s = unsafe { ngx_str_t::from_bytes(cf.pool, &bytes) }.ok_or(NetError::NoMemory)?;
    s.len -= 1;
    Ok(s)
}

impl Tls {
    /// The context for `redis_tls=on` (None when TLS is off). Errors name the file.
    pub fn new(cf: &mut ngx_conf_t, p: &RedisParams) -> Result<Option<Tls>, NetError> {
        if !p.tls {
            return Ok(None);
        }
        // SAFETY: the configuration's pool is live; an all-zero ngx_ssl_t is the C "unset"
        // value ngx_ssl_create fills in.
        let ssl =
            unsafe { ngx_pcalloc(cf.pool, core::mem::size_of::<ngx_ssl_t>()) }.cast::<ngx_ssl_t>();
        // SAFETY: null, or a fresh zeroed block of the pool.
        let ctx = unsafe { ssl.as_mut() }.ok_or(NetError::NoMemory)?;
        ctx.log = cf.log;
        let protocols = (NGX_SSL_TLSv1_2 | NGX_SSL_TLSv1_3) as usize;
        // SAFETY: a zeroed context to fill; no data pointer (a client context).
        if unsafe { ngx_ssl_create(ctx, protocols, core::ptr::null_mut()) } != Status::NGX_OK.0 {
            return Err(NetError::SslContext);
        }
        // The context is freed with the configuration, as nginx does for proxy_ssl.
        // SAFETY: the configuration's pool; a cleanup with no data of its own.
        let cln = unsafe { ngx_pool_cleanup_add(cf.pool, 0).as_mut() }.ok_or(NetError::NoMemory)?;
        cln.handler = Some(ngx_ssl_cleanup_ctx);
        cln.data = ssl.cast::<c_void>();
        if let (Some(cert), Some(key)) = (&p.tls_cert, &p.tls_key) {
            let mut c = conf_str(cf, cert)?;
            let mut k = conf_str(cf, key)?;
            // SAFETY: a live context and configuration; nginx logs what fails.
            let rc = unsafe { ngx_ssl_certificate(cf, ssl, &mut c, &mut k, core::ptr::null_mut()) };
            if rc != Status::NGX_OK.0 {
                return Err(NetError::Certificate {
                    cert: cert.clone(),
                    key: key.clone(),
                });
            }
        }
        let verify = p.tls_ca.is_some();
        if let Some(ca) = &p.tls_ca {
            let mut c = conf_str(cf, ca)?;
            // SAFETY: as above; this also turns peer verification on.
            if unsafe { ngx_ssl_trusted_certificate(cf, ssl, &mut c, 10) } != Status::NGX_OK.0 {
                return Err(NetError::Ca(ca.clone()));
            }
        }
        let name = match &p.tls_name {
            Some(n) => Some(CString::new(n.as_str()).map_err(|_| NetError::TlsName)?),
            None => None,
        };
        Ok(Some(Tls { ssl, name, verify }))
    }

    /// Starts the handshake on a connected socket. `host` is the address's host (the name
    /// to verify without `redis_tls_name=`); `done` is called when an `Again` handshake ends.
    pub fn start(
        &self,
        c: &mut ngx_connection_t,
        host: &str,
        done: ngx_connection_handler_pt,
    ) -> Handshake {
        let flags = (NGX_SSL_CLIENT | NGX_SSL_BUFFER) as usize;
        // SAFETY: a live connection without SSL yet; the context outlives it (configuration).
        if unsafe { ngx_ssl_create_connection(self.ssl, c, flags) } != Status::NGX_OK.0 {
            return Handshake::Failed("cannot create an SSL connection".into());
        }
        // SAFETY: ngx_ssl_create_connection set c.ssl and its SSL object.
        let conn = unsafe { (*c.ssl).connection };
        let ip = host.parse::<IpAddr>().ok();
        let name = match (&self.name, ip) {
            (Some(n), _) => Some(n.clone()),
            (None, None) => CString::new(host).ok(),
            (None, Some(_)) => None,
        };
        if let Some(n) = &name {
            // SNI (SSL_set_tlsext_host_name is this SSL_ctrl).
            // SAFETY: a live SSL object; OpenSSL copies the name.
            unsafe {
                SSL_ctrl(
                    conn,
                    SSL_CTRL_SET_TLSEXT_HOSTNAME as _,
                    TLSEXT_NAMETYPE_host_name as _,
                    n.as_ptr() as *mut c_void,
                )
            };
        }
        if self.verify {
            let set = match (&name, ip) {
                // SAFETY: a live SSL object; OpenSSL copies the name.
                (Some(n), _) => unsafe { SSL_set1_host(conn, n.as_ptr()) },
                (None, Some(addr)) => {
                    let text = CString::new(addr.to_string()).unwrap_or_default();
                    // SAFETY: the SSL object's own verify parameters; OpenSSL copies.
                    unsafe { X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(conn), text.as_ptr()) }
                }
                (None, None) => 0,
            };
            if set != 1 {
                return Handshake::Failed(format!("cannot set the name to verify for {host}"));
            }
        }
        // SAFETY: a live connection with its SSL set up above.
        match unsafe { ngx_ssl_handshake(c) } {
            rc if rc == Status::NGX_OK.0 => Handshake::Done,
            rc if rc == Status::NGX_AGAIN.0 => {
                // SAFETY: as above; nginx calls the handler when the handshake ends.
                unsafe { (*c.ssl).handler = done };
                Handshake::Again
            }
            _ => Handshake::Failed("TLS handshake failed".into()),
        }
    }

    /// After the handshake: whether it finished, and (with a CA) whether the certificate
    /// verified, chain and name.
    pub fn verified(&self, c: &ngx_connection_t) -> Result<(), NetError> {
        // SAFETY: null, or the connection's SSL state.
        let Some(s) = (unsafe { c.ssl.as_ref() }) else {
            return Err(NetError::NoTls);
        };
        if s.handshaked() == 0 {
            return Err(NetError::Handshake);
        }
        if !self.verify {
            return Ok(());
        }
        // SAFETY: the connection's SSL object, after its handshake.
        let rc = unsafe { SSL_get_verify_result(s.connection) };
        if rc == i64::from(X509_V_OK) {
            return Ok(());
        }
        // SAFETY: OpenSSL returns a static string for any code.
        let why = unsafe { CStr::from_ptr(X509_verify_cert_error_string(rc) as *const c_char) };
        Err(NetError::Verify(why.to_string_lossy().into_owned()))
    }
}
