//! What a person sees of one page load, and the headers a browser sends for it.
//!
//! A browser asks for the page's document with navigation headers, and once the document
//! is the origin's page it asks for every asset at once, each with the `Sec-Fetch-Dest` and
//! `Accept` of its kind (Chromium's values). A page load is then one of [`PageLoad`]'s
//! kinds, decided by [`classify`] from the document's answer ([`document`]) and the final
//! answer of each asset after redirects ([`Asset`]).

/// Status recorded for a request that got no HTTP answer (connect/read/write error, timeout).
pub const NO_ANSWER: u16 = 0;

/// A navigation's `Accept` (Chromium's, without the signed-exchange entry).
pub const NAV_ACCEPT: &str =
    "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8";

/// Why the browser asks for the document: its `Sec-Fetch-Site` and `Sec-Fetch-User`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Navigation {
    /// The person types the address: `Sec-Fetch-Site: none`, `Sec-Fetch-User: ?1`.
    Typed,
    /// The person follows a link or reloads a page of the site: `same-origin`, `?1`.
    Click,
    /// The waiting page reloads itself: `same-origin`, no user activation.
    Refresh,
}

/// The request headers of a document request (besides `Accept`, [`NAV_ACCEPT`]).
pub fn navigation_headers(nav: Navigation) -> Vec<(&'static str, &'static str)> {
    let site = match nav {
        Navigation::Typed => "none",
        Navigation::Click | Navigation::Refresh => "same-origin",
    };
    let mut h = vec![
        ("Sec-Fetch-Dest", "document"),
        ("Sec-Fetch-Mode", "navigate"),
        ("Sec-Fetch-Site", site),
    ];
    if nav != Navigation::Refresh {
        h.push(("Sec-Fetch-User", "?1"));
    }
    h.push(("Upgrade-Insecure-Requests", "1"));
    h
}

/// An asset's kind, from its path's extension, as a browser's `Sec-Fetch-Dest` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dest {
    Style,
    Script,
    Image,
    Font,
    /// Anything else, as `fetch()` would ask for it (`Sec-Fetch-Dest: empty`).
    Empty,
}

impl Dest {
    /// `/x/app.css?v=2` -> [`Dest::Style`], `.js`/`.mjs` -> script, images, fonts.
    pub fn of(path: &str) -> Dest {
        let path = path.split(['?', '#']).next().unwrap_or("");
        let name = path.rsplit('/').next().unwrap_or("");
        let ext = match name.rsplit_once('.') {
            Some((_, e)) => e.to_ascii_lowercase(),
            None => return Dest::Empty,
        };
        match ext.as_str() {
            "css" => Dest::Style,
            "js" | "mjs" => Dest::Script,
            "svg" | "png" | "jpg" | "jpeg" | "gif" | "webp" | "avif" | "ico" | "bmp" => Dest::Image,
            "woff" | "woff2" | "ttf" | "otf" => Dest::Font,
            _ => Dest::Empty,
        }
    }

    /// The `Accept` a browser sends for this kind.
    pub fn accept(self) -> &'static str {
        match self {
            Dest::Style => "text/css,*/*;q=0.1",
            Dest::Image => "image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8",
            Dest::Script | Dest::Font | Dest::Empty => "*/*",
        }
    }

    /// The `Sec-Fetch-*` headers of a same-origin subresource request of this kind:
    /// `<link rel=stylesheet>`, classic `<script src>` and `<img>` are `no-cors`; fonts
    /// and `fetch()` are `cors`.
    pub fn headers(self) -> [(&'static str, &'static str); 3] {
        let (dest, mode) = match self {
            Dest::Style => ("style", "no-cors"),
            Dest::Script => ("script", "no-cors"),
            Dest::Image => ("image", "no-cors"),
            Dest::Font => ("font", "cors"),
            Dest::Empty => ("empty", "cors"),
        };
        [
            ("Sec-Fetch-Dest", dest),
            ("Sec-Fetch-Mode", mode),
            ("Sec-Fetch-Site", "same-origin"),
        ]
    }
}

/// What the document request ended with, after following redirects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Document {
    /// The origin's page: `200`, no `Retry-After`, and the origin's marker in the body
    /// when one is known. The browser then loads the assets.
    Origin,
    /// The waiting room's answer: not the origin's page, and it carries `Retry-After`
    /// (every waiting answer of the room does, whatever its status).
    Waiting,
    /// Any other answer (an error page such as `limit_req`'s bare `503`, a redirect loop)
    /// or no answer at all.
    Error,
    /// The request budget ran out before the document's final answer.
    Cut,
}

/// Tells the origin's page from the waiting room's answer. `marker`: a string only the
/// origin's page contains (`--page-marker`); without one, a `200` without `Retry-After`
/// is the origin's page.
pub fn document(status: u16, retry_after: bool, body: &[u8], marker: Option<&str>) -> Document {
    if status == NO_ANSWER {
        return Document::Error;
    }
    let marked = marker.is_none_or(|m| contains(body, m.as_bytes()));
    if status == 200 && !retry_after && marked {
        Document::Origin
    } else if retry_after {
        Document::Waiting
    } else {
        Document::Error
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || hay.windows(needle.len()).any(|w| w == needle)
}

/// What one asset request ended with, after following redirects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asset {
    Ok,
    /// Its final status was not `200` (`NO_ANSWER` for no answer).
    Failed(u16),
    /// The request budget ran out before its final answer.
    Cut,
}

/// One page load as the person saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageLoad {
    /// The origin's page and every asset `200`.
    Complete,
    /// The origin's page, and at least one asset not `200` after redirects.
    Broken,
    /// The waiting room's answer; no asset asked for.
    Waiting,
    /// An error page or no answer for the document; no asset asked for.
    Error,
    /// Cut short by the end of the request budget (at most one per browser, at the end).
    Unfinished,
}

/// The page load from its document's answer and its assets' final answers (in any order).
/// A failed asset makes the page broken even when another was cut by the budget.
pub fn classify(doc: Document, assets: &[Asset]) -> PageLoad {
    match doc {
        Document::Origin => {
            if assets.iter().any(|a| matches!(a, Asset::Failed(_))) {
                PageLoad::Broken
            } else if assets.contains(&Asset::Cut) {
                PageLoad::Unfinished
            } else {
                PageLoad::Complete
            }
        }
        Document::Waiting => PageLoad::Waiting,
        Document::Error => PageLoad::Error,
        Document::Cut => PageLoad::Unfinished,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &[u8] = b"<!doctype html><meta name=\"bench-origin\" content=\"shop\">...";
    const MARK: Option<&str> = Some("name=\"bench-origin\"");

    #[test]
    fn the_origins_page_and_the_rooms_answers() {
        assert_eq!(document(200, false, PAGE, MARK), Document::Origin);
        assert_eq!(document(200, false, PAGE, None), Document::Origin);
        // The room's waiting page: 503 (or a configured 200/429) with Retry-After.
        assert_eq!(document(503, true, b"position 4", MARK), Document::Waiting);
        assert_eq!(document(200, true, b"position 4", MARK), Document::Waiting);
        assert_eq!(document(429, true, b"", None), Document::Waiting);
        // Retry-After wins over a 200 that happens to carry the marker.
        assert_eq!(document(200, true, PAGE, MARK), Document::Waiting);
        // limit_req's bare 503, a 200 that is not the origin's page, a redirect left over.
        assert_eq!(document(503, false, b"<h1>503</h1>", MARK), Document::Error);
        assert_eq!(
            document(200, false, b"something else", MARK),
            Document::Error
        );
        assert_eq!(document(307, false, b"", None), Document::Error);
        assert_eq!(document(NO_ANSWER, false, b"", None), Document::Error);
    }

    #[test]
    fn page_loads_are_complete_broken_waiting_or_error() {
        use Asset::*;
        let o = Document::Origin;
        assert_eq!(classify(o, &[Ok, Ok, Ok]), PageLoad::Complete);
        assert_eq!(classify(o, &[]), PageLoad::Complete);
        assert_eq!(classify(o, &[Ok, Failed(503), Ok]), PageLoad::Broken);
        assert_eq!(classify(o, &[Failed(307), Ok, Ok]), PageLoad::Broken);
        assert_eq!(classify(o, &[Failed(NO_ANSWER)]), PageLoad::Broken);
        assert_eq!(classify(o, &[Ok, Cut, Cut]), PageLoad::Unfinished);
        assert_eq!(classify(o, &[Cut, Failed(503)]), PageLoad::Broken);
        assert_eq!(classify(Document::Waiting, &[]), PageLoad::Waiting);
        assert_eq!(classify(Document::Error, &[]), PageLoad::Error);
        assert_eq!(classify(Document::Cut, &[]), PageLoad::Unfinished);
    }

    #[test]
    fn assets_are_asked_for_as_their_kind() {
        assert_eq!(Dest::of("/app.css"), Dest::Style);
        assert_eq!(Dest::of("/shop/app.js?v=3"), Dest::Script);
        assert_eq!(Dest::of("/logo.SVG"), Dest::Image);
        assert_eq!(Dest::of("/f/x.woff2"), Dest::Font);
        assert_eq!(Dest::of("/api/items"), Dest::Empty);
        assert_eq!(Dest::of("/v1.2/items"), Dest::Empty);
        assert_eq!(Dest::Style.accept(), "text/css,*/*;q=0.1");
        assert_eq!(Dest::Script.accept(), "*/*");
        assert!(Dest::Image.accept().starts_with("image/avif,"));
        assert_eq!(
            Dest::Image.headers(),
            [
                ("Sec-Fetch-Dest", "image"),
                ("Sec-Fetch-Mode", "no-cors"),
                ("Sec-Fetch-Site", "same-origin")
            ]
        );
        assert_eq!(Dest::Script.headers()[0], ("Sec-Fetch-Dest", "script"));
    }

    #[test]
    fn navigations() {
        let typed = navigation_headers(Navigation::Typed);
        assert!(typed.contains(&("Sec-Fetch-Mode", "navigate")));
        assert!(typed.contains(&("Sec-Fetch-Dest", "document")));
        assert!(typed.contains(&("Sec-Fetch-Site", "none")));
        assert!(typed.contains(&("Sec-Fetch-User", "?1")));
        assert!(typed.contains(&("Upgrade-Insecure-Requests", "1")));
        let refresh = navigation_headers(Navigation::Refresh);
        assert!(refresh.contains(&("Sec-Fetch-Site", "same-origin")));
        assert!(!refresh.iter().any(|(n, _)| *n == "Sec-Fetch-User"));
        assert!(navigation_headers(Navigation::Click).contains(&("Sec-Fetch-User", "?1")));
    }
}
