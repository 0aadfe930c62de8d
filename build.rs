//! Passes the features nginx-sys detected in the nginx build to the compiler,
//! so `cfg(ngx_feature = "...")` works in the module source.
fn main() {
    println!("cargo::rerun-if-env-changed=DEP_NGINX_FEATURES");
    println!("cargo::rustc-check-cfg=cfg(ngx_feature, values(any()))");
    if let Ok(features) = std::env::var("DEP_NGINX_FEATURES") {
        for feature in features.split(',').map(str::trim) {
            println!("cargo::rustc-cfg=ngx_feature=\"{feature}\"");
        }
    }
}
