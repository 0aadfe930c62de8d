//! [S28] The "invite only" answer of an invite-only line (`invite=`) to a client without a
//! valid enqueue token: it says so plainly and gives no place. No refresh: coming back
//! without an invitation changes nothing.

use super::Lang;
use crate::util::out::{put_json_str, Out};

/// `{"status":"invite_only","room":".."}`.
pub fn write_invite_json(room: &str, out: &mut impl Out) {
    out.put(b"{\"status\":\"invite_only\",\"room\":");
    put_json_str(out, room);
    out.put(b"}");
}

/// A short page in `lang` (the room's name is not shown: nothing from the request is).
pub fn write_invite_html(lang: Lang, out: &mut impl Out) {
    let (html_lang, title, lead) = match lang {
        Lang::En => (
            "en",
            "This sale is by invitation",
            "Open the link from your invitation to take your place in line. Without one, \
             no place can be given here.",
        ),
        Lang::Ja => (
            "ja",
            "招待制の販売です",
            "招待メールのリンクから開くと、順番待ちに並べます。招待がない場合はお並びいただけません。",
        ),
    };
    out.put(b"<!DOCTYPE html>\n<html lang=\"");
    out.put(html_lang.as_bytes());
    out.put(b"\">\n<head>\n<meta charset=\"utf-8\">\n");
    out.put(b"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    out.put(b"<meta name=\"robots\" content=\"noindex, nofollow\">\n<title>");
    out.put(title.as_bytes());
    out.put(b"</title>\n</head>\n<body>\n<main>\n<h1>");
    out.put(title.as_bytes());
    out.put(b"</h1>\n<p>");
    out.put(lead.as_bytes());
    out.put(b"</p>\n</main>\n</body>\n</html>\n");
}

/// The most bytes either answer writes for a room name of `room_len` bytes.
pub fn invite_max_len(room_len: usize) -> usize {
    1024usize.saturating_add(room_len.saturating_mul(6))
}
