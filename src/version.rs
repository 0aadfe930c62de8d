//! The module's version (the package's, from `Cargo.toml`) and the nginx it was built for:
//! logged once at start-up and on every reload, and exported as `smart_limit_build_info`.

/// This module's version.
pub const MODULE: &str = env!("CARGO_PKG_VERSION");

/// The nginx version the module was built against (a module loads only into that one).
pub fn nginx() -> &'static str {
    ngx::ffi::NGINX_VERSION.to_str().unwrap_or("unknown")
}
