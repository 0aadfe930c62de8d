//! A browser's cookie jar, reduced to what the benchmark needs: one origin, so Domain and
//! Path are ignored; Secure is ignored too (loopback is a secure context for browsers).
//! `Max-Age` of zero or less, or an empty value, deletes the cookie.

#[derive(Default, Debug, Clone)]
pub struct Jar {
    cookies: Vec<(String, String)>,
}

impl Jar {
    /// Stores one `Set-Cookie` header value.
    pub fn store(&mut self, set_cookie: &str) {
        let mut parts = set_cookie.split(';');
        let Some((name, value)) = parts.next().and_then(|nv| nv.split_once('=')) else {
            return;
        };
        let (name, value) = (name.trim(), value.trim());
        if name.is_empty() {
            return;
        }
        let expired = parts.any(|attr| {
            let (k, v) = attr.split_once('=').unwrap_or((attr, ""));
            k.trim().eq_ignore_ascii_case("max-age")
                && v.trim().parse::<i64>().map(|n| n <= 0).unwrap_or(false)
        });
        self.cookies.retain(|(n, _)| n != name);
        if !expired && !value.is_empty() {
            self.cookies.push((name.to_string(), value.to_string()));
        }
    }

    /// The `Cookie` header value, if the jar holds anything.
    pub fn header(&self) -> Option<String> {
        if self.cookies.is_empty() {
            return None;
        }
        let pairs: Vec<String> = self
            .cookies
            .iter()
            .map(|(n, v)| format!("{n}={v}"))
            .collect();
        Some(pairs.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stores_replaces_and_deletes() {
        let mut j = Jar::default();
        assert_eq!(j.header(), None);
        j.store("sl_shop=abc.def; Path=/; HttpOnly; Secure; SameSite=Lax");
        j.store("other=1");
        assert_eq!(j.header().unwrap(), "sl_shop=abc.def; other=1");
        j.store("sl_shop=new==; Max-Age=600");
        assert_eq!(j.header().unwrap(), "other=1; sl_shop=new==");
        j.store("other=gone; Max-Age=0");
        j.store("garbage");
        j.store("=nameless");
        assert_eq!(j.header().unwrap(), "sl_shop=new==");
        j.store("sl_shop=");
        assert_eq!(j.header(), None);
    }
}
