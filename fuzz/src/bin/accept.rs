//! Fuzz target: content and language negotiation on request headers (`page::wants_json`
//! on `Accept`, `page::pick_lang` on `Accept-Language`). The whole input is given to both.
//!
//! Properties: only a header naming "json" can select JSON (wildcards never do), and only
//! one naming "ja" can select Japanese.

use smart_limit_core::page::{pick_lang, wants_json, Lang};
use smart_limit_fuzz::contains_ignore_case;

fn main() {
    assert!(!wants_json(None));
    assert_eq!(pick_lang(None), Lang::En);
    afl::fuzz!(|data: &[u8]| {
        if wants_json(Some(data)) {
            assert!(
                contains_ignore_case(data, b"json"),
                "JSON chosen without json"
            );
        }
        if pick_lang(Some(data)) == Lang::Ja {
            assert!(
                contains_ignore_case(data, b"ja"),
                "Japanese chosen without ja"
            );
        }
    });
}
