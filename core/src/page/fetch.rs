//! What a request is for, as a browser says it ([S29]): a page's document, one of its
//! sub-resources, a script's own call, or something else (a program, an old browser).
//!
//! A page view must be decided once, at its document: a browser sends the document first and
//! then a page's stylesheets, scripts and images in parallel, within milliseconds, so a rule
//! that decides every request alone splits a page between the origin and the waiting room.
//! Browsers name each request's destination in the Fetch Metadata headers
//! (`Sec-Fetch-Dest`, `Sec-Fetch-Mode`; every current engine sends them); where they are
//! missing, the `Accept` header a browser sends for a document or an image says the same.
//! Anything that names neither (curl, an app, a load balancer's probe) is a program: it keeps
//! the room's usual rules (the cookie check, a place, JSON when it asks for it).
//!
//! Header values come from the client: matched byte-wise, nothing here panics.

/// What a request is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fetch {
    /// A navigation: the document of a page view (or of a frame in it).
    Document,
    /// A page's sub-resource: a stylesheet, script, image, font, media, worker ...
    Asset,
    /// A page script's own call (`fetch()`, `XMLHttpRequest`: `Sec-Fetch-Dest: empty`): part
    /// of a page view when it carries the page's pass, a program of its own otherwise.
    Call,
    /// No sign of a browser's page: a program.
    Other,
}

impl Fetch {
    /// Classifies a request from its `Sec-Fetch-Dest`, `Sec-Fetch-Mode` and `Accept` values.
    pub fn classify(dest: Option<&[u8]>, mode: Option<&[u8]>, accept: Option<&[u8]>) -> Fetch {
        let dest = dest.map(<[u8]>::trim_ascii);
        if mode.is_some_and(|m| m.trim_ascii().eq_ignore_ascii_case(b"navigate")) {
            return Fetch::Document;
        }
        match dest {
            Some(d) if DOCUMENT_DESTS.iter().any(|k| d.eq_ignore_ascii_case(k)) => Fetch::Document,
            Some(d) if d.eq_ignore_ascii_case(b"empty") => Fetch::Call,
            // Any other destination the Fetch standard names (and any it adds later) is a
            // sub-resource of a page.
            Some(d) if !d.is_empty() => Fetch::Asset,
            _ => Fetch::from_accept(accept),
        }
    }

    /// Without Fetch Metadata (older browsers): a document's `Accept` names HTML first-class,
    /// an image's or a stylesheet's starts with its own type. A script's (`*/*`) looks like a
    /// program's, and is one here.
    fn from_accept(accept: Option<&[u8]>) -> Fetch {
        let Some(accept) = accept.map(<[u8]>::trim_ascii) else {
            return Fetch::Other;
        };
        let first = accept
            .split(|&b| b == b',')
            .next()
            .map(|r| {
                r.split(|&b| b == b';')
                    .next()
                    .unwrap_or_default()
                    .trim_ascii()
            })
            .unwrap_or_default();
        if first.eq_ignore_ascii_case(b"text/html")
            || first.eq_ignore_ascii_case(b"application/xhtml+xml")
        {
            return Fetch::Document;
        }
        let lower = |prefix: &[u8]| {
            first.len() >= prefix.len()
                && first
                    .get(..prefix.len())
                    .is_some_and(|p| p.eq_ignore_ascii_case(prefix))
        };
        if lower(b"image/") || lower(b"text/css") || lower(b"font/") {
            Fetch::Asset
        } else {
            Fetch::Other
        }
    }

    /// A page's sub-resource or a page script's call: what a page pass may let through.
    pub fn of_a_page(self) -> bool {
        matches!(self, Fetch::Asset | Fetch::Call)
    }
}

/// `Sec-Fetch-Dest` values of a page view's document (a top-level page or a frame).
const DOCUMENT_DESTS: [&[u8]; 3] = [b"document", b"iframe", b"frame"];

#[cfg(test)]
mod tests {
    use super::Fetch;

    fn classify(dest: Option<&str>, mode: Option<&str>, accept: Option<&str>) -> Fetch {
        Fetch::classify(
            dest.map(str::as_bytes),
            mode.map(str::as_bytes),
            accept.map(str::as_bytes),
        )
    }

    #[test]
    fn fetch_metadata_names_the_page_view() {
        let html = Some("text/html,application/xhtml+xml,*/*;q=0.8");
        assert_eq!(
            classify(Some("document"), Some("navigate"), html),
            Fetch::Document
        );
        assert_eq!(
            classify(Some("iframe"), Some("navigate"), html),
            Fetch::Document
        );
        // A navigation wins whatever the destination says.
        assert_eq!(
            classify(Some("embed"), Some("navigate"), None),
            Fetch::Document
        );
        for dest in [
            "style", "script", "image", "font", "video", "manifest", "worker", "x-new",
        ] {
            assert_eq!(
                classify(Some(dest), Some("no-cors"), Some("*/*")),
                Fetch::Asset
            );
        }
        // Header values are case-insensitive and may carry spaces.
        assert_eq!(classify(Some(" Image "), None, None), Fetch::Asset);
        assert_eq!(
            classify(Some("empty"), Some("cors"), Some("*/*")),
            Fetch::Call
        );
        // The destination decides over Accept: a script asking for HTML is still a script.
        assert_eq!(classify(Some("script"), None, html), Fetch::Asset);
    }

    #[test]
    fn accept_speaks_for_browsers_without_fetch_metadata() {
        let doc = Some("text/html,application/xhtml+xml;q=0.9,*/*;q=0.8");
        assert_eq!(classify(None, None, doc), Fetch::Document);
        assert_eq!(
            classify(None, None, Some("application/xhtml+xml")),
            Fetch::Document
        );
        assert_eq!(classify(None, None, Some("image/webp,*/*")), Fetch::Asset);
        assert_eq!(
            classify(None, None, Some("TEXT/CSS,*/*;q=0.1")),
            Fetch::Asset
        );
        assert_eq!(classify(None, None, Some("font/woff2")), Fetch::Asset);
        // curl, an app, a probe: programs.
        assert_eq!(classify(None, None, Some("*/*")), Fetch::Other);
        assert_eq!(classify(None, None, Some("application/json")), Fetch::Other);
        assert_eq!(
            classify(None, None, Some("application/json, text/html")),
            Fetch::Other
        );
        assert_eq!(classify(None, None, None), Fetch::Other);
        assert_eq!(classify(Some(""), None, Some("")), Fetch::Other);
    }

    #[test]
    fn only_sub_resources_and_calls_ride_a_page_pass() {
        assert!(Fetch::Asset.of_a_page());
        assert!(Fetch::Call.of_a_page());
        assert!(!Fetch::Document.of_a_page());
        assert!(!Fetch::Other.of_a_page());
    }

    #[test]
    fn garbage_never_panics() {
        let junk: [&[u8]; 5] = [b"\xff\xfe", b";;;,,,", b"image", b"/", b"\0text/html"];
        for a in junk {
            for b in junk {
                let _ = Fetch::classify(Some(a), Some(b), Some(a));
                let _ = Fetch::classify(None, None, Some(b));
            }
        }
    }
}
