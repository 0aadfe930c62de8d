//! The one boundary between nginx's requests and this module.
//!
//! Every request entry point (phase handler, content handlers, the header filter, variable
//! getters) starts with [`entry`]: the raw pointer becomes `&mut ngx::http::Request` once,
//! there, and a panic is caught before it could unwind into nginx (it would abort the worker).
//! Past that point code uses `Request`'s own methods and the small [`RequestExt`] below;
//! the few raw reads left (header pointers nginx keeps) say why they hold.

use core::panic::AssertUnwindSafe;
use core::ptr;

use ngx::core::{Buffer, Status, TemporaryBuffer};
use ngx::ffi::{
    ngx_array_push, ngx_buf_t, ngx_chain_t, ngx_conf_t, ngx_http_complex_value_t,
    ngx_http_handler_pt, ngx_http_phases, ngx_http_phases_NGX_HTTP_LOG_PHASE,
    ngx_http_phases_NGX_HTTP_PREACCESS_PHASE, ngx_http_request_t, ngx_int_t, ngx_list_push,
    ngx_str_t, ngx_table_elt_t, NGX_HTTP_INTERNAL_SERVER_ERROR, NGX_LOG_ALERT,
};
use ngx::http::{HTTPStatus, HttpModuleMainConf, NgxHttpCoreModule, Request};
use ngx::ngx_log_error;
use smart_limit_core::page::Fetch;
use smart_limit_core::util::out::Out;

pub const INTERNAL_ERROR: ngx_int_t = NGX_HTTP_INTERNAL_SERVER_ERROR as ngx_int_t;
/// A phase handler's "not mine, go on".
pub const DECLINED: ngx_int_t = Status::NGX_DECLINED.0;

/// Adds `handler` to the PREACCESS phase (postconfiguration). nginx runs a phase's handlers
/// last-installed first.
pub fn install_preaccess(
    cf: &mut ngx_conf_t,
    handler: unsafe extern "C" fn(*mut ngx_http_request_t) -> ngx_int_t,
) -> Result<(), ()> {
    install_in(cf, ngx_http_phases_NGX_HTTP_PREACCESS_PHASE, handler)
}

/// Adds `handler` to the log phase (after the response: `max_active=auto`'s measurements).
pub fn install_log(
    cf: &mut ngx_conf_t,
    handler: unsafe extern "C" fn(*mut ngx_http_request_t) -> ngx_int_t,
) -> Result<(), ()> {
    install_in(cf, ngx_http_phases_NGX_HTTP_LOG_PHASE, handler)
}

fn install_in(
    cf: &mut ngx_conf_t,
    phase: ngx_http_phases,
    handler: unsafe extern "C" fn(*mut ngx_http_request_t) -> ngx_int_t,
) -> Result<(), ()> {
    let cmcf = NgxHttpCoreModule::main_conf_mut(cf).ok_or(())?;
    let phase = cmcf.phases.get_mut(phase as usize).ok_or(())?;
    // SAFETY: the phase's handler array belongs to the core module's main configuration,
    // which is being built; a push gives room for one handler pointer or null.
    let h = unsafe { ngx_array_push(&mut phase.handlers) }.cast::<ngx_http_handler_pt>();
    // SAFETY: null, or a fresh element of the handler array.
    let h = unsafe { h.as_mut() }.ok_or(())?;
    *h = Some(handler);
    Ok(())
}

/// Runs a request entry point on the request nginx passed: `what` names it in the alert a
/// panic leaves, and the request then gets `on_panic`.
pub fn entry(
    r: *mut ngx_http_request_t,
    what: &str,
    on_panic: ngx_int_t,
    f: impl FnOnce(&mut Request) -> ngx_int_t,
) -> ngx_int_t {
    if r.is_null() {
        return on_panic;
    }
    // SAFETY: nginx calls its request handlers with a live request, which it does not touch
    // while the handler runs; `Request` is a transparent wrapper of `ngx_http_request_t`.
    let req = unsafe { Request::from_ngx_http_request(r) };
    match std::panic::catch_unwind(AssertUnwindSafe(|| f(req))) {
        Ok(rc) => rc,
        Err(_) => {
            // SAFETY: the request and its connection are still live (the panic unwound out of
            // our code only); nothing else holds a reference to them now.
            let log = unsafe { (*(*r).connection).log };
            ngx_log_error!(NGX_LOG_ALERT, log, "smart_limit: internal error {}", what);
            on_panic
        }
    }
}

/// Bytes of a header nginx keeps a pointer to (`Accept`, `Accept-Language`, ...).
fn header_bytes<'a>(h: *mut ngx_table_elt_t) -> Option<&'a [u8]> {
    // SAFETY: nginx sets these pointers to elements of the request's header list, which live
    // in the request pool as long as the request.
    let h = unsafe { h.as_ref() }?;
    Some(h.value.as_bytes())
}

/// What the module asks of a request beyond `ngx::http::Request`'s own methods.
pub trait RequestExt {
    /// Values of every request header called `name` (case-insensitive), in arrival order.
    fn header_values<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [u8]>;
    /// The `Accept` header.
    fn accept(&self) -> Option<&[u8]>;
    /// What the request is for, from its Fetch Metadata and `Accept` headers ([S29]): one
    /// pass over the request's headers.
    fn fetch(&self) -> Fetch;
    /// The `Accept-Language` header.
    fn accept_language(&self) -> Option<&[u8]>;
    /// Whether the client connection is TLS (cookies then get `Secure`).
    fn is_tls(&self) -> bool;
    /// The client's address as flood control keys it: IPv4 whole, IPv6 by its /64 (one
    /// subscriber's network; an IPv4-mapped address as IPv4). Empty for other families.
    fn client_address(&self) -> ClientAddress;
    /// Sets `Location` (nginx makes a relative one absolute, as for its own redirects).
    fn set_location(&mut self, uri: &[u8]) -> bool;
    /// A directive's value with variables, as a switch: on when non-empty and not "0"
    /// (`off_words` are also off).
    fn switch_on(&self, cv: &ngx_http_complex_value_t, off_words: &[&[u8]]) -> bool;
    /// A response body of at most `capacity` bytes, in the request's pool.
    fn body(&self, capacity: usize) -> Option<Body>;
    /// Sends a whole response: status, content type, `body`. Returns what the request should
    /// be finalized with.
    fn respond(&mut self, status: u16, content_type: &'static str, body: Body) -> ngx_int_t;
    /// Adds a response header (`key` and `value` are copied to the pool).
    fn add_header(&mut self, key: &str, value: &str) -> bool;
    /// Adds a response header whose name is static; `value` is copied to the pool unless it
    /// is static too. Cheaper than [`RequestExt::add_header`] on the waiting answer's path
    /// (no copies of the name, no lower-case copy: output headers need neither).
    fn add_static_header(&mut self, key: &'static str, value: HeaderValue) -> bool;
}

/// A response header value for [`RequestExt::add_static_header`].
pub enum HeaderValue<'a> {
    Static(&'static str),
    Copied(&'a str),
}

impl RequestExt for Request {
    fn header_values<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [u8]> {
        self.headers_in_iterator()
            .filter(move |(k, _)| k.as_bytes().eq_ignore_ascii_case(name.as_bytes()))
            .map(|(_, v)| v.as_bytes())
    }

    fn accept(&self) -> Option<&[u8]> {
        header_bytes(self.as_ref().headers_in.accept)
    }

    fn fetch(&self) -> Fetch {
        let (mut dest, mut mode) = (None, None);
        for (k, v) in self.headers_in_iterator() {
            let k = k.as_bytes();
            if k.eq_ignore_ascii_case(b"sec-fetch-dest") {
                dest = Some(v.as_bytes());
            } else if k.eq_ignore_ascii_case(b"sec-fetch-mode") {
                mode = Some(v.as_bytes());
            }
        }
        Fetch::classify(dest, mode, self.accept())
    }

    fn accept_language(&self) -> Option<&[u8]> {
        header_bytes(self.as_ref().headers_in.accept_language)
    }

    fn is_tls(&self) -> bool {
        // SAFETY: a request's connection lives as long as the request.
        unsafe { self.connection().as_ref() }.is_some_and(|c| !c.ssl.is_null())
    }

    fn client_address(&self) -> ClientAddress {
        let mut out = ClientAddress::default();
        // SAFETY: a request's connection lives as long as the request; its sockaddr is set
        // when it is accepted (realip may replace it, for the request).
        let Some(sa) = (unsafe { self.connection().as_ref() }).and_then(|c| {
            // SAFETY: see above.
            unsafe { c.sockaddr.as_ref() }.map(|sa| (sa, c.socklen))
        }) else {
            return out;
        };
        let (sa, len) = sa;
        let family = i32::from(sa.sa_family);
        if family == libc::AF_INET && len as usize >= core::mem::size_of::<libc::sockaddr_in>() {
            // SAFETY: an AF_INET sockaddr of at least sockaddr_in's size.
            let sin = unsafe { &*(sa as *const _ as *const libc::sockaddr_in) };
            out.set(&sin.sin_addr.s_addr.to_ne_bytes());
        } else if family == libc::AF_INET6
            && len as usize >= core::mem::size_of::<libc::sockaddr_in6>()
        {
            // SAFETY: an AF_INET6 sockaddr of at least sockaddr_in6's size.
            let sin6 = unsafe { &*(sa as *const _ as *const libc::sockaddr_in6) };
            let a = sin6.sin6_addr.s6_addr;
            match a {
                [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, b0, b1, b2, b3] => {
                    out.set(&[b0, b1, b2, b3])
                }
                _ => out.set(a.get(..8).unwrap_or_default()),
            }
        }
        out
    }

    fn set_location(&mut self, uri: &[u8]) -> bool {
        // SAFETY: the request's pool lives as long as the response.
        let Some(value) = (unsafe { ngx_str_t::from_bytes(self.as_ref().pool, uri) }) else {
            return false;
        };
        // SAFETY: the response's header list; a push gives an uninitialised element (filled
        // entirely below) or null.
        let h = unsafe { ngx_list_push(&mut self.as_mut().headers_out.headers) };
        // SAFETY: see above.
        let Some(h) = (unsafe { h.cast::<ngx_table_elt_t>().as_mut() }) else {
            return false;
        };
        h.hash = 1;
        h.key = ngx_str_t {
            len: "Location".len(),
            data: c"Location".as_ptr().cast_mut().cast(),
        };
        h.value = value;
        h.lowcase_key = ptr::null_mut();
        #[cfg(ngx_table_elt_next)]
        {
            h.next = ptr::null_mut();
        }
        // The header filter writes `location` itself (absolute when it starts with "/").
        self.as_mut().headers_out.location = h;
        true
    }

    fn switch_on(&self, cv: &ngx_http_complex_value_t, off_words: &[&[u8]]) -> bool {
        match self.get_complex_value(cv) {
            Some(v) => {
                let v = v.as_bytes();
                !v.is_empty() && v != b"0" && !off_words.contains(&v)
            }
            None => false,
        }
    }

    fn body(&self, capacity: usize) -> Option<Body> {
        let buf = self.pool().create_buffer(capacity.max(1))?;
        Some(Body {
            buf,
            overflow: false,
        })
    }

    fn respond(&mut self, status: u16, content_type: &'static str, mut body: Body) -> ngx_int_t {
        if body.overflow {
            return INTERNAL_ERROR;
        }
        let len = body.len();
        {
            let h = &mut self.as_mut().headers_out;
            h.content_type = ngx_str_t {
                len: content_type.len(),
                data: content_type.as_ptr().cast_mut(),
            };
            h.content_type_len = content_type.len();
            h.content_type_lowcase = ptr::null_mut();
        }
        self.set_status(HTTPStatus(usize::from(status)));
        self.set_content_length_n(len);
        let rc = self.send_header();
        if rc == Status::NGX_ERROR || rc.0 > Status::NGX_OK.0 || self.header_only() {
            return rc.0;
        }
        let last = self.is_main();
        let buf = if len == 0 {
            // An empty in-memory buffer would be "zero size buf in output": send a bare
            // end-of-response marker instead.
            let b = self.pool().calloc_type::<ngx_buf_t>();
            // SAFETY: a zeroed ngx_buf_t from the request pool, or null.
            match unsafe { b.as_mut() } {
                Some(b) => {
                    b.set_last_buf(u32::from(last));
                    b.set_last_in_chain(1);
                    b as *mut ngx_buf_t
                }
                None => return INTERNAL_ERROR,
            }
        } else {
            body.buf.set_last_buf(last);
            body.buf.set_last_in_chain(true);
            body.buf.as_ngx_buf_mut()
        };
        let mut out = ngx_chain_t {
            buf,
            next: ptr::null_mut(),
        };
        self.output_filter(&mut out).0
    }

    fn add_header(&mut self, key: &str, value: &str) -> bool {
        self.add_header_out(key, value).is_some()
    }

    fn add_static_header(&mut self, key: &'static str, value: HeaderValue) -> bool {
        let value = match value {
            HeaderValue::Static(v) => ngx_str_t {
                len: v.len(),
                data: v.as_ptr().cast_mut(),
            },
            HeaderValue::Copied(v) => {
                // SAFETY: the request's pool lives as long as the response.
                let copy = unsafe { ngx_str_t::from_bytes(self.as_ref().pool, v.as_bytes()) };
                match copy {
                    Some(s) => s,
                    None => return false,
                }
            }
        };
        // SAFETY: the response's header list; a push gives an uninitialised element (filled
        // entirely below) or null.
        let h = unsafe { ngx_list_push(&mut self.as_mut().headers_out.headers) };
        // SAFETY: see above.
        let Some(h) = (unsafe { h.cast::<ngx_table_elt_t>().as_mut() }) else {
            return false;
        };
        // hash != 0 marks the header live; output headers are written by name.
        h.hash = 1;
        h.key = ngx_str_t {
            len: key.len(),
            data: key.as_ptr().cast_mut(),
        };
        h.value = value;
        h.lowcase_key = ptr::null_mut();
        #[cfg(ngx_table_elt_next)]
        {
            h.next = ptr::null_mut();
        }
        true
    }
}

/// A client address as flood control keys it (at most 8 bytes).
#[derive(Default)]
pub struct ClientAddress {
    bytes: [u8; 8],
    len: usize,
}

impl ClientAddress {
    fn set(&mut self, b: &[u8]) {
        let n = b.len().min(8);
        self.bytes[..n].copy_from_slice(&b[..n]);
        self.len = n;
    }

    pub fn to_vec(&self) -> Vec<u8> {
        self.bytes[..self.len].to_vec()
    }
}

/// A response body being written into the request's pool: at most the capacity it was made
/// with (a longer write is cut and the response refused, never a buffer overrun).
pub struct Body {
    buf: TemporaryBuffer,
    overflow: bool,
}

impl Body {
    pub fn len(&self) -> usize {
        self.buf.len()
    }
}

impl Out for Body {
    fn put(&mut self, bytes: &[u8]) {
        let b = self.buf.as_ngx_buf_mut();
        // SAFETY: `b` is the pool buffer made by `RequestExt::body`; `last..end` is its unused
        // part, and at most that many bytes are copied there.
        unsafe {
            let room = (*b).end.offset_from((*b).last).max(0) as usize;
            let n = bytes.len().min(room);
            ptr::copy_nonoverlapping(bytes.as_ptr(), (*b).last, n);
            (*b).last = (*b).last.add(n);
            if n < bytes.len() {
                self.overflow = true;
            }
        }
    }
}
