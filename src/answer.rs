//! Answers the module writes itself: the waiting page (HTML or JSON), metrics, and the
//! response headers that go with them (ticket cookie, `Retry-After`, `Cache-Control`).

use core::ptr;

use ngx::core::{Pool, Status};
use ngx::ffi::{
    ngx_buf_t, ngx_chain_t, ngx_http_output_filter, ngx_http_request_t, ngx_http_send_header,
    ngx_int_t, ngx_list_part_t, ngx_list_push, ngx_list_t, ngx_str_t, ngx_table_elt_t,
    NGX_HTTP_INTERNAL_SERVER_ERROR,
};
use smart_limit_core::page::{self, ViewStatus, WaitView};

use crate::conf::LocConf;

/// Copies `bytes` into the request pool (nginx keeps pointers to header values and bodies
/// until the request ends).
unsafe fn pool_copy(r: *mut ngx_http_request_t, bytes: &[u8]) -> Option<*mut u8> {
    let pool = Pool::from_ngx_pool((*r).pool);
    let mem = pool.alloc_unaligned(bytes.len().max(1)) as *mut u8;
    if mem.is_null() {
        return None;
    }
    ptr::copy_nonoverlapping(bytes.as_ptr(), mem, bytes.len());
    Some(mem)
}

/// Adds a response header. `key` is static; `value` is copied.
pub unsafe fn add_header(r: *mut ngx_http_request_t, key: &'static str, value: &[u8]) -> bool {
    let Some(data) = pool_copy(r, value) else {
        return false;
    };
    let h = ngx_list_push(&mut (*r).headers_out.headers) as *mut ngx_table_elt_t;
    if h.is_null() {
        return false;
    }
    (*h).hash = 1;
    #[cfg(ngx_table_elt_next)]
    {
        (*h).next = ptr::null_mut();
    }
    (*h).key = ngx_str_t {
        len: key.len(),
        data: key.as_ptr() as *mut u8,
    };
    (*h).value = ngx_str_t {
        len: value.len(),
        data,
    };
    (*h).lowcase_key = ptr::null_mut();
    true
}

/// Value of a request header nginx keeps a pointer to (Accept, Accept-Language, ...).
pub unsafe fn header_value<'a>(h: *mut ngx_table_elt_t) -> Option<&'a [u8]> {
    if h.is_null() || (*h).value.data.is_null() {
        return None;
    }
    Some(core::slice::from_raw_parts((*h).value.data, (*h).value.len))
}

/// One request header, borrowed from the request.
pub struct HeaderRef<'a> {
    pub key: &'a [u8],
    pub value: &'a [u8],
}

/// The live headers of an nginx header list (`headers_in.headers` or `headers_out.headers`),
/// mutable; entries with hash 0 (deleted) or no key or value are skipped.
pub unsafe fn header_list<'a>(
    list: *mut ngx_list_t,
) -> impl Iterator<Item = &'a mut ngx_table_elt_t> {
    let mut part: *mut ngx_list_part_t = &mut (*list).part;
    let mut i = 0usize;
    core::iter::from_fn(move || loop {
        if part.is_null() {
            return None;
        }
        if i >= (*part).nelts {
            part = (*part).next;
            i = 0;
            continue;
        }
        let h = &mut *((*part).elts as *mut ngx_table_elt_t).add(i);
        i += 1;
        if h.hash == 0 || h.key.data.is_null() || h.value.data.is_null() {
            continue;
        }
        return Some(h);
    })
}

/// The request's headers in arrival order.
pub unsafe fn request_headers<'a>(
    r: *mut ngx_http_request_t,
) -> impl Iterator<Item = HeaderRef<'a>> {
    header_list(&mut (*r).headers_in.headers).map(|h| HeaderRef {
        key: core::slice::from_raw_parts(h.key.data, h.key.len),
        value: core::slice::from_raw_parts(h.value.data, h.value.len),
    })
}

/// Runs a request handler so that a panic never crosses into nginx (it would abort the
/// worker): it is logged as `what` and the request gets a 500.
pub unsafe fn guarded(
    r: *mut ngx_http_request_t,
    what: &str,
    f: impl FnOnce() -> ngx_int_t,
) -> ngx_int_t {
    match std::panic::catch_unwind(core::panic::AssertUnwindSafe(f)) {
        Ok(rc) => rc,
        Err(_) => {
            ngx::ngx_log_error!(
                ngx::ffi::NGX_LOG_ALERT,
                (*(*r).connection).log,
                "smart_limit: internal error {}",
                what
            );
            NGX_HTTP_INTERNAL_SERVER_ERROR as ngx_int_t
        }
    }
}

/// Sends a complete response: status, content type, body. Returns what the caller should
/// finalize the request with.
pub unsafe fn send(
    r: *mut ngx_http_request_t,
    status: u16,
    content_type: &'static str,
    body: &[u8],
) -> ngx_int_t {
    (*r).headers_out.status = status as usize;
    (*r).headers_out.content_type = ngx_str_t {
        len: content_type.len(),
        data: content_type.as_ptr() as *mut u8,
    };
    (*r).headers_out.content_type_len = content_type.len();
    (*r).headers_out.content_type_lowcase = ptr::null_mut();
    (*r).headers_out.content_length_n = body.len() as i64;

    let rc = ngx_http_send_header(r);
    if rc == Status::NGX_ERROR.0 || rc > Status::NGX_OK.0 || (*r).header_only() != 0 {
        return rc;
    }
    let Some(data) = pool_copy(r, body) else {
        return NGX_HTTP_INTERNAL_SERVER_ERROR as ngx_int_t;
    };
    let pool = Pool::from_ngx_pool((*r).pool);
    let b = pool.calloc_type::<ngx_buf_t>();
    if b.is_null() {
        return NGX_HTTP_INTERNAL_SERVER_ERROR as ngx_int_t;
    }
    (*b).start = data;
    (*b).pos = data;
    (*b).last = data.add(body.len());
    (*b).end = (*b).last;
    (*b).set_memory(1);
    (*b).set_last_buf(if (*r).main == r { 1 } else { 0 });
    (*b).set_last_in_chain(1);
    let mut out = ngx_chain_t {
        buf: b,
        next: ptr::null_mut(),
    };
    ngx_http_output_filter(r, &mut out)
}

/// The waiting answer: HTML for people, JSON for programs that ask for it; never cached;
/// `Retry-After` says when to come back. Waiting and closed answers have the configured
/// status (`smart_limit_status`, 503 by default); the admitted answer of a
/// `smart_limit_poll` location is a 200 without `Retry-After`.
pub unsafe fn waiting(r: *mut ngx_http_request_t, lcf: &LocConf, view: &WaitView) -> ngx_int_t {
    let accept = header_value((*r).headers_in.accept);
    let admitted = view.status == ViewStatus::Admitted;
    let status = if admitted { 200 } else { lcf.status() };
    if !admitted {
        let retry = view.refresh_secs.to_string();
        if !add_header(r, "Retry-After", retry.as_bytes()) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR as ngx_int_t;
        }
    }
    if !add_header(r, "Cache-Control", b"no-store") {
        return NGX_HTTP_INTERNAL_SERVER_ERROR as ngx_int_t;
    }
    if page::wants_json(accept) {
        let body = page::render_json(view);
        send(r, status, "application/json", body.as_bytes())
    } else {
        let lang = page::pick_lang(header_value((*r).headers_in.accept_language));
        let body = page::render_html(view, lang, lcf.page.as_deref());
        send(r, status, "text/html; charset=utf-8", body.as_bytes())
    }
}
