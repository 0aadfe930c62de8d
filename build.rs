//! Passes the features nginx-sys detected in the nginx build to the compiler,
//! so `cfg(ngx_feature = "...")` works in the module source.
fn main() {
    println!("cargo::rerun-if-env-changed=DEP_NGINX_FEATURES");
    println!("cargo::rustc-check-cfg=cfg(ngx_feature, values(any()))");
    // nginx 1.23 chained repeated headers through `ngx_table_elt_t.next`; older ones (Debian
    // 1.22) do not have the field.
    println!("cargo::rerun-if-env-changed=DEP_NGINX_VERSION_NUMBER");
    println!("cargo::rustc-check-cfg=cfg(ngx_table_elt_next)");
    let version: u64 = std::env::var("DEP_NGINX_VERSION_NUMBER")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    if version >= 1_023_000 {
        println!("cargo::rustc-cfg=ngx_table_elt_next");
    }
    if let Ok(features) = std::env::var("DEP_NGINX_FEATURES") {
        for feature in features.split(',').map(str::trim) {
            println!("cargo::rustc-cfg=ngx_feature=\"{feature}\"");
        }
    }
}
