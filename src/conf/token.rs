//! `smart_limit_token_key FILE... [issuer=NAME] [audience=NAME] [bearer=HEADER]` (http level):
//! the keys that sign admission tokens ([S28]); the first signs, all verify (rotation).

use ngx::ffi::ngx_conf_t;
use smart_limit_core::token::{Issuer, SigningKey, Tokens, DEFAULT_BEARER, DEFAULT_ISSUER};

use super::directive::{self, read_text, refuse, setter, Refused};
use super::MainConf;

setter!(set_token_key, MainConf, token_key);

fn token_key(cf: &mut ngx_conf_t, mcf: &mut MainConf) -> Result<(), Refused> {
    if mcf.tokens.is_some() {
        return Err(refuse(cf, "is duplicate"));
    }
    let mut keys = Vec::new();
    let mut issuer = DEFAULT_ISSUER.to_string();
    let mut audience = None;
    let mut bearer = DEFAULT_BEARER.to_string();
    for arg in directive::args(cf)? {
        if let Some(v) = arg.strip_prefix("issuer=") {
            issuer = claim_text(cf, &arg, v)?;
        } else if let Some(v) = arg.strip_prefix("audience=") {
            audience = Some(claim_text(cf, &arg, v)?);
        } else if let Some(v) = arg.strip_prefix("bearer=") {
            let token_char = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b'_';
            if v.is_empty() || !v.bytes().all(token_char) {
                return Err(refuse(cf, format_args!("has a bad header name: \"{arg}\"")));
            }
            bearer = v.to_ascii_lowercase();
        } else {
            let (path, text) = read_text(cf, &arg, "")?;
            let key = SigningKey::from_pem(&text)
                .map_err(|e| refuse(cf, format_args!("\"{path}\": {e}")))?;
            keys.push(key);
        }
    }
    let issuer =
        Issuer::new(keys, issuer, audience).ok_or_else(|| refuse(cf, "needs a key file"))?;
    mcf.tokens = Some(Tokens { issuer, bearer });
    Ok(())
}

/// `issuer=` and `audience=`: a claim's text, 1 to 256 bytes, no control characters.
fn claim_text(cf: &mut ngx_conf_t, arg: &str, v: &str) -> Result<String, Refused> {
    if v.is_empty() || v.len() > 256 || v.bytes().any(|b| b.is_ascii_control()) {
        return Err(refuse(cf, format_args!("has a bad value: \"{arg}\"")));
    }
    Ok(v.to_string())
}
