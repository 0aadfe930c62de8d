//! What an answer of the room means for a client: the outcome, and the position and line
//! length it was told (from the HTML page or the JSON answer).

use crate::history::Outcome;
use crate::http::Response;

/// An answer, read.
#[derive(Debug, Clone, PartialEq)]
pub struct Read {
    pub status: u16,
    pub outcome: Outcome,
    pub pos: Option<u64>,
    pub qlen: Option<u64>,
    /// When the answer asks the client back, in ms: `refresh_seconds` of a JSON answer, the
    /// page's `<meta http-equiv="refresh">`.
    pub refresh_ms: Option<u64>,
    /// The room's ticket (`name=value`), when the answer set one.
    pub ticket: Option<String>,
}

/// Reads `res`; `cookie_prefix` names the room's ticket cookie (`smart_limit_ROOM=`).
pub fn read(res: &Response, cookie_prefix: &str) -> Read {
    let ticket = res
        .set_cookies
        .iter()
        .filter_map(|c| c.split(';').next())
        .map(str::trim)
        .find(|c| c.starts_with(cookie_prefix) && c.len() > cookie_prefix.len())
        .map(str::to_string);
    let body = String::from_utf8_lossy(&res.body);
    let (pos, qlen, refresh_ms) = if body.trim_start().starts_with('{') {
        (
            json_number(&body, "\"position\":"),
            json_number(&body, "\"queue_length\":"),
            json_number(&body, "\"refresh_seconds\":").map(|s| s * 1000),
        )
    } else {
        (
            html_position(&body),
            html_queue(&body),
            html_refresh(&body).map(|s| s * 1000),
        )
    };
    let outcome = match res.status {
        200..=299 => Outcome::Admitted,
        307 | 302 | 303 => Outcome::New,
        429 => Outcome::Throttled,
        // (An event's pre-queue holds a place without a position: the place is held all the
        // same, and its arrival is this answer's, not the first position's after the start.)
        503 if pos.is_some() || prequeue(&body) => Outcome::Waiting,
        _ => Outcome::Other,
    };
    Read {
        status: res.status,
        outcome,
        pos,
        qlen,
        refresh_ms,
        ticket,
    }
}

/// An event's pre-queue answer: JSON `"status":"prequeue"`, or the built-in page's countdown.
fn prequeue(body: &str) -> bool {
    body.contains("\"status\":\"prequeue\"") || body.contains("id=\"countdown\"")
}

fn leading_number(s: &str) -> Option<u64> {
    let digits: String = s
        .trim_start()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

fn json_number(body: &str, key: &str) -> Option<u64> {
    let at = body.find(key)? + key.len();
    leading_number(body.get(at..)?)
}

/// The built-in page: `<div class="pos-num">N`.
fn html_position(body: &str) -> Option<u64> {
    let key = "<div class=\"pos-num\">";
    let at = body.find(key)? + key.len();
    leading_number(body.get(at..)?)
}

/// The page's own refresh: `<meta http-equiv="refresh" content="N">` (a browser follows it).
fn html_refresh(body: &str) -> Option<u64> {
    let key = "<meta http-equiv=\"refresh\" content=\"";
    let at = body.find(key)? + key.len();
    leading_number(body.get(at..)?)
}

/// The built-in page's line length: the last `<dd>` that starts with a number (the first is
/// the estimated wait).
fn html_queue(body: &str) -> Option<u64> {
    body.match_indices("<dd>")
        .filter_map(|(i, m)| leading_number(body.get(i + m.len()..)?))
        .last()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(status: u16, body: &str, cookies: &[&str]) -> Response {
        Response {
            status,
            set_cookies: cookies.iter().map(|c| c.to_string()).collect(),
            location: None,
            body_bytes: body.len() as u64,
            body: body.as_bytes().to_vec(),
        }
    }

    #[test]
    fn reads_the_json_answer() {
        let r = read(
            &res(
                503,
                r#"{"status":"waiting","room":"shop","position":12,"eta_seconds":180,"eta_known":true,"refresh_seconds":2,"queue_length":40,"updated_at":1}"#,
                &["smart_limit_shop=abc; Path=/; HttpOnly"],
            ),
            "smart_limit_shop=",
        );
        assert_eq!(r.outcome, Outcome::Waiting);
        assert_eq!(
            (r.pos, r.qlen, r.refresh_ms),
            (Some(12), Some(40), Some(2000))
        );
        assert_eq!(r.ticket.as_deref(), Some("smart_limit_shop=abc"));
    }

    #[test]
    fn reads_the_html_page() {
        let body = "<meta http-equiv=\"refresh\" content=\"3\">\n<div class=\"pos-num\">7<span class=\"pos-unit\"></span></div>\n<dl>\n\
                    <div><dt>Wait</dt><dd>about 2 minutes</dd></div>\n<div><dt>In line</dt><dd>31 people</dd></div>";
        let r = read(&res(503, body, &[]), "smart_limit_shop=");
        assert_eq!(
            (r.outcome, r.pos, r.qlen),
            (Outcome::Waiting, Some(7), Some(31))
        );
        assert_eq!((r.refresh_ms, r.ticket), (Some(3000), None));
    }

    #[test]
    fn a_prequeue_place_is_a_waiting_one_without_a_position() {
        let json = r#"{"status":"prequeue","room":"shop","position":null,"refresh_seconds":9,"queue_length":40,"starts_at":1}"#;
        let r = read(&res(503, json, &[]), "x=");
        assert_eq!(
            (r.outcome, r.pos, r.qlen),
            (Outcome::Waiting, None, Some(40))
        );
        let page = "<div class=\"pos\"><div class=\"pos-num\" id=\"countdown\"></div></div>";
        assert_eq!(read(&res(503, page, &[]), "x=").outcome, Outcome::Waiting);
        assert_eq!(read(&res(503, "busy", &[]), "x=").outcome, Outcome::Other);
    }

    #[test]
    fn other_answers() {
        assert_eq!(read(&res(307, "", &[]), "x=").outcome, Outcome::New);
        assert_eq!(read(&res(200, "ok", &[]), "x=").outcome, Outcome::Admitted);
        assert_eq!(read(&res(429, "", &[]), "x=").outcome, Outcome::Throttled);
        assert_eq!(read(&res(503, "closed", &[]), "x=").outcome, Outcome::Other);
        // A proof cookie or another room's is not the ticket.
        let r = read(
            &res(307, "", &["smart_limit_shop_proof=1", "other=2"]),
            "smart_limit_shop=",
        );
        assert_eq!(r.ticket, None);
    }
}
