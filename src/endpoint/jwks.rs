//! `smart_limit_jwks`: the public keys of `smart_limit_token_key` as a JWK Set (RFC 7517), so
//! any service verifies the room's admission tokens with an ordinary JWT library.

use ngx::ffi::{
    ngx_conf_t, ngx_http_request_t, ngx_int_t, NGX_HTTP_GET, NGX_HTTP_HEAD, NGX_HTTP_NOT_ALLOWED,
};
use ngx::http::{HttpModuleMainConf, Request};

use ngx::core::Status;
use smart_limit_core::util::out::Out;

use crate::conf::directive::{refuse, set_content_handler, setter, Refused};
use crate::conf::{Endpoint, LocConf, MainConf};
use crate::request::{self, HeaderValue, RequestExt, INTERNAL_ERROR};
use crate::Module;

setter!(set_jwks, LocConf, jwks);

/// The JWK Set's media type (RFC 7517 section 8.5).
const CONTENT_TYPE: &str = "application/jwk-set+json";

fn jwks(cf: &mut ngx_conf_t, lcf: &mut LocConf) -> Result<(), Refused> {
    if lcf.endpoint != Endpoint::None {
        return Err(refuse(
            cf,
            "is duplicate or combined with another smart_limit endpoint",
        ));
    }
    let has_keys = Module::main_conf(cf).is_some_and(|m: &MainConf| m.tokens.is_some());
    if !has_keys {
        return Err(refuse(
            cf,
            "needs smart_limit_token_key before it in the http block",
        ));
    }
    set_content_handler(cf, content_handler)?;
    lcf.endpoint = Endpoint::Jwks;
    Ok(())
}

unsafe extern "C" fn content_handler(r: *mut ngx_http_request_t) -> ngx_int_t {
    request::entry(r, "while serving the key set", INTERNAL_ERROR, serve)
}

fn serve(r: &mut Request) -> ngx_int_t {
    if r.as_ref().method & (NGX_HTTP_GET | NGX_HTTP_HEAD) as usize == 0 {
        return NGX_HTTP_NOT_ALLOWED as ngx_int_t;
    }
    if r.discard_request_body() != Status::NGX_OK {
        return INTERNAL_ERROR;
    }
    let Some(tokens) = Module::main_conf(r).and_then(|m| m.tokens.as_ref()) else {
        return INTERNAL_ERROR;
    };
    // Verifiers cache the set; a rotation publishes the new key before it signs (put it
    // second, reload, wait this long, then put it first).
    if !r.add_static_header("Cache-Control", HeaderValue::Static("public, max-age=300")) {
        return INTERNAL_ERROR;
    }
    let set = tokens.issuer.jwks();
    let Some(mut body) = r.body(set.len()) else {
        return INTERNAL_ERROR;
    };
    body.put(set.as_bytes());
    r.respond(200, CONTENT_TYPE, body)
}
