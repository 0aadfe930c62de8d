//! Unit tests of the waiting answers: negotiation, JSON, pages, templates.

use super::accept::parse_q;
use super::*;
use crate::config::ParseError;
use crate::util::time::utc_parts;

fn view(status: ViewStatus) -> WaitView<'static> {
    WaitView {
        room: "shop",
        status,
        position: Some(12),
        queue_len: 40,
        eta_secs: Some(180),
        refresh_secs: 20,
        updated_at: 1_694_432_754,
        starts_at: None,
        challenge: None,
        token: None,
        resumed: false,
    }
}

/// [S27] The first answer after an absence says the place was resumed; others say nothing.
#[test]
fn json_says_resumed_only_when_it_was() {
    let s = render_json(&view(ViewStatus::Waiting));
    assert!(!s.contains("resumed"), "{s}");
    let v = WaitView {
        resumed: true,
        ..view(ViewStatus::Waiting)
    };
    let s = render_json(&v);
    assert!(s.contains(",\"resumed\":true"), "{s}");
    assert!(s.len() <= json_max_len(&v));
}

#[test]
fn json_fields_and_types() {
    let s = render_json(&view(ViewStatus::Waiting));
    assert_eq!(
        s,
        r#"{"status":"waiting","room":"shop","position":12,"eta_seconds":180,"eta_known":true,"refresh_seconds":20,"queue_length":40,"updated_at":1694432754}"#
    );
    let mut v = view(ViewStatus::Closed);
    v.position = None;
    v.eta_secs = None;
    v.room = "a\"b<";
    let j: serde_json::Value = serde_json::from_str(&render_json(&v)).unwrap();
    assert_eq!(j["status"], "closed");
    assert_eq!(j["room"], "a\"b<");
    assert!(j["position"].is_null());
    assert!(j["eta_seconds"].is_null());
    assert_eq!(j["eta_known"], false);
    assert_eq!(j["refresh_seconds"], 20);
    assert_eq!(j["queue_length"], 40);
    assert_eq!(j["updated_at"], 1_694_432_754u64);
    let j: serde_json::Value =
        serde_json::from_str(&render_json(&view(ViewStatus::Admitted))).unwrap();
    assert_eq!(j["status"], "admitted");
}

#[test]
fn accept_negotiation() {
    let yes: &[&[u8]] = &[
        b"application/json",
        b"Application/JSON",
        b"application/json; charset=utf-8",
        b"application/json;q=0.5",
        b"application/problem+json",
        b"application/vnd.example.v1+json;q=0.9",
        b"text/plain, application/json",
        b"text/html;q=0.5, application/json",
        b"application/json, text/html",
        b"application/json;q=1.0, text/html;q=0.9, */*;q=0.1",
        b"  application/json  ;  q = 0.7 ",
    ];
    for a in yes {
        assert!(wants_json(Some(a)), "{}", String::from_utf8_lossy(a));
    }
    let no: &[&[u8]] = &[
        b"",
        b"*/*",
        b"application/*",
        b"text/html",
        b"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
        b"text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8",
        b"text/html, application/json",
        b"application/json;q=0",
        b"application/json;q=0.000",
        b"application/json;q=2",
        b"application/json;q=abc",
        b"application/jsonx",
        b"application/+json",
        b"text/json+xml",
        b"\xff\xfe,;;;===,,",
        b"text/html;q=0.9, application/json;q=0.8",
    ];
    for a in no {
        assert!(!wants_json(Some(a)), "{}", String::from_utf8_lossy(a));
    }
    assert!(!wants_json(None));
}

#[test]
fn q_values() {
    assert_eq!(parse_q(b"1"), Some(1000));
    assert_eq!(parse_q(b"1.000"), Some(1000));
    assert_eq!(parse_q(b"1."), Some(1000));
    assert_eq!(parse_q(b"0"), Some(0));
    assert_eq!(parse_q(b"0.5"), Some(500));
    assert_eq!(parse_q(b"0.123"), Some(123));
    assert_eq!(parse_q(b"0.05"), Some(50));
    for bad in [
        &b"1.001"[..],
        b"0.1234",
        b"2",
        b"",
        b".5",
        b"-0",
        b"0.x",
        b"00.5",
        b"1.5",
    ] {
        assert_eq!(parse_q(bad), None, "{}", String::from_utf8_lossy(bad));
    }
}

#[test]
fn language() {
    let ja: &[&[u8]] = &[
        b"ja",
        b"ja-JP",
        b"JA-jp",
        b"ja-JP,ja;q=0.9,en-US;q=0.8,en;q=0.7",
        b"en;q=0.5, ja",
        b"fr, ja;q=0.9",
        b"ja;q=0.8, en;q=0.7",
        b"ja, en",
    ];
    for h in ja {
        assert_eq!(
            pick_lang(Some(h)),
            Lang::Ja,
            "{}",
            String::from_utf8_lossy(h)
        );
    }
    let en: &[&[u8]] = &[
        b"",
        b"en",
        b"en-US,en;q=0.9,ja;q=0.8",
        b"ja;q=0.5, en",
        b"en, ja",
        b"fr",
        b"*",
        b"jp",
        b"jax",
        b"ja;q=0",
        b"ja;q=bogus",
        b"\xff\xfe;;,,==",
        b"j a",
    ];
    for h in en {
        assert_eq!(
            pick_lang(Some(h)),
            Lang::En,
            "{}",
            String::from_utf8_lossy(h)
        );
    }
    assert_eq!(pick_lang(None), Lang::En);
}

#[test]
fn eta_wording() {
    assert_eq!(eta_text(None, Lang::En), "calculating…");
    assert_eq!(eta_text(None, Lang::Ja), "計算中");
    assert_eq!(eta_text(Some(0), Lang::En), "any moment now");
    assert_eq!(eta_text(Some(1), Lang::En), "about 1 second");
    assert_eq!(eta_text(Some(45), Lang::En), "about 45 seconds");
    assert_eq!(eta_text(Some(60), Lang::En), "about 1 minute");
    assert_eq!(eta_text(Some(89), Lang::En), "about 1 minute");
    assert_eq!(eta_text(Some(90), Lang::En), "about 2 minutes");
    assert_eq!(eta_text(Some(180), Lang::En), "about 3 minutes");
    assert_eq!(eta_text(Some(7200), Lang::En), "about 2 hours");
    assert_eq!(
        eta_text(Some(u64::MAX), Lang::En),
        format!("about {} hours", (u64::MAX / 60 + 30) / 60)
    );
    assert_eq!(eta_text(Some(0), Lang::Ja), "まもなく");
    assert_eq!(eta_text(Some(45), Lang::Ja), "約45秒");
    assert_eq!(eta_text(Some(180), Lang::Ja), "約3分");
    assert_eq!(eta_text(Some(10_800), Lang::Ja), "約3時間");
}

#[test]
fn utc_time() {
    assert_eq!(utc_parts(0), (1970, 1, 1, 0, 0, 0));
    assert_eq!(utc_parts(1_694_432_754), (2023, 9, 11, 11, 45, 54));
    assert_eq!(utc_parts(951_782_400), (2000, 2, 29, 0, 0, 0));
    assert_eq!(utc_parts(u64::MAX), (9999, 12, 31, 23, 59, 59));
}

#[test]
fn default_page_en() {
    let html = render_html(&view(ViewStatus::Waiting), Lang::En, None);
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains("<html lang=\"en\">"));
    assert!(html.contains("<meta name=\"viewport\""));
    assert!(html.contains("<meta http-equiv=\"refresh\" content=\"20\">"));
    assert!(html.contains("<h1>The site is busy right now</h1>"));
    assert!(html.contains("aria-live=\"polite\""));
    assert!(html.contains("<div class=\"pos-num\">12</div>"));
    assert!(html.contains("about 3 minutes"));
    assert!(html.contains("<dd>40</dd>"));
    assert!(html.contains("every 20 seconds"));
    assert!(html.contains("Keep this tab open"));
    assert!(html.contains("prefers-color-scheme:dark"));
    assert!(html.contains("datetime=\"2023-09-11T11:45:54Z\""));
    // No external assets: the one script is the page's own, inline.
    for banned in [
        "src=",
        "href=",
        "http://",
        "https://",
        "@import",
        "url(",
        "<noscript",
    ] {
        assert!(!html.contains(banned), "{banned}");
    }
    assert_eq!(html.matches("<script").count(), 1);
    let mut v = view(ViewStatus::Waiting);
    v.eta_secs = None;
    v.position = None;
    v.refresh_secs = 0;
    let html = render_html(&v, Lang::En, None);
    assert!(html.contains("calculating…"));
    assert!(html.contains("Checking…"));
    assert!(html.contains("content=\"1\""), "refresh clamped to 1s");
}

#[test]
fn default_page_ja() {
    let html = render_html(&view(ViewStatus::Waiting), Lang::Ja, None);
    assert!(html.contains("<html lang=\"ja\">"));
    assert!(html.contains("ただいま混雑しています"));
    assert!(html.contains("あなたの順番"));
    assert!(html.contains("12<span class=\"pos-unit\">番目</span>"));
    assert!(html.contains("約3分"));
    assert!(html.contains("<dd>40人</dd>"));
    assert!(html.contains("20秒ごとに自動で更新"));
    assert!(html.contains("タブを閉じずに"));
}

#[test]
fn closed_and_admitted_pages() {
    let html = render_html(&view(ViewStatus::Closed), Lang::En, None);
    assert!(html.contains("Temporarily closed"));
    assert!(!html.contains("class=\"pos-num"));
    assert!(html.contains("http-equiv=\"refresh\""));
    let html = render_html(&view(ViewStatus::Closed), Lang::Ja, None);
    assert!(html.contains("一時停止"));
    let html = render_html(&view(ViewStatus::Admitted), Lang::En, None);
    assert!(html.contains("It's your turn"));
    let html = render_html(&view(ViewStatus::Admitted), Lang::Ja, None);
    assert!(html.contains("順番が来ました"));
    let html = render_html(&view(ViewStatus::Throttled), Lang::En, None);
    assert!(html.contains("Many visitors from your network"));
    assert!(html.contains("tries again by itself in 20 seconds"));
    assert!(!html.contains("class=\"pos-num"));
    let html = render_html(&view(ViewStatus::Throttled), Lang::Ja, None);
    assert!(html.contains("同じネットワーク"));
    assert!(render_json(&view(ViewStatus::Throttled)).starts_with("{\"status\":\"throttled\""));
}

#[test]
fn template_placeholders_replaced() {
    let t = "<p>{{position}}|{{ eta_seconds }}|{{eta_text}}|{{refresh_seconds}}|{{room}}|\
             {{queue_length}}|{{status}}|{{updated_at}}</p>";
    assert_eq!(check_template(t), Ok(()));
    let out = render_html(&view(ViewStatus::Waiting), Lang::En, Some(t));
    assert_eq!(
        out,
        "<p>12|180|about 3 minutes|20|shop|40|waiting|1694432754</p>"
    );
    let out = render_html(&view(ViewStatus::Waiting), Lang::Ja, Some(t));
    assert!(out.contains("|約3分|"));
    let mut v = view(ViewStatus::Closed);
    v.position = None;
    v.eta_secs = None;
    let out = render_html(&v, Lang::En, Some(t));
    assert_eq!(out, "<p>||calculating…|20|shop|40|closed|1694432754</p>");
    // Repeated placeholders, none at all, adjacent ones, text around them.
    assert_eq!(
        render_html(
            &view(ViewStatus::Waiting),
            Lang::En,
            Some("{{position}}{{position}}")
        ),
        "1212"
    );
    assert_eq!(
        render_html(&view(ViewStatus::Waiting), Lang::En, Some("plain")),
        "plain"
    );
    assert_eq!(
        render_html(&view(ViewStatus::Waiting), Lang::En, Some("")),
        ""
    );
}

#[test]
fn template_escapes_values() {
    let mut v = view(ViewStatus::Waiting);
    v.room = "<script>alert('x')</script>&\"";
    let out = render_html(&v, Lang::En, Some("<h1 title=\"{{room}}\">{{room}}</h1>"));
    assert_eq!(
        out,
        "<h1 title=\"&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;&quot;\">\
         &lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;&quot;</h1>"
    );
    assert!(!out.contains("<script>"));
}

#[test]
fn template_non_placeholders_are_text() {
    let t = "<style>a{{color:red}}</style><script>if(a){{b}}</script>{{ }}{{x-y}}{{unclosed";
    // "{{b}}" looks like a placeholder and is unknown.
    assert_eq!(
        check_template(t),
        Err(ParseError::UnknownPlaceholder("{{b}}".to_string()))
    );
    let t = "<style>a{{color:red}}</style>{{ }}{{x-y}}{{{position}}}{{unclosed {{";
    assert_eq!(check_template(t), Ok(()));
    let out = render_html(&view(ViewStatus::Waiting), Lang::En, Some(t));
    assert_eq!(
        out,
        "<style>a{{color:red}}</style>{{ }}{{x-y}}{12}{{unclosed {{"
    );
}

#[test]
fn template_unknown_names_reported() {
    let e = check_template("{{position}} {{colour}} {{ size }} {{colour}}").unwrap_err();
    assert_eq!(
        e,
        ParseError::UnknownPlaceholder("{{colour}}, {{size}}".to_string())
    );
    let msg = e.to_string();
    assert!(
        msg.starts_with("unknown placeholder {{colour}}, {{size}} (known: {{position}}"),
        "{msg}"
    );
    // At render time unknown placeholders stay verbatim.
    let out = render_html(
        &view(ViewStatus::Waiting),
        Lang::En,
        Some("{{colour}}-{{position}}"),
    );
    assert_eq!(out, "{{colour}}-12");
}

#[test]
fn max_len_bounds_every_answer() {
    let mut v = view(ViewStatus::Waiting);
    v.room = "<&\"'>";
    for lang in [Lang::En, Lang::Ja] {
        for status in [
            ViewStatus::Waiting,
            ViewStatus::Closed,
            ViewStatus::Admitted,
        ] {
            for (pos, eta) in [
                (None, None),
                (Some(u64::MAX), Some(u64::MAX)),
                (Some(1), Some(59)),
            ] {
                v.status = status;
                v.position = pos;
                v.eta_secs = eta;
                v.queue_len = u64::MAX;
                v.refresh_secs = u64::MAX;
                v.updated_at = u64::MAX;
                let mut out = Vec::new();
                write_html(&v, lang, None, &mut out);
                assert!(out.len() <= html_max_len(&v, lang, None));
                let t = Template::compile("{{room}}{{room}}{{eta_text}}{{position}}{{updated_at}}");
                out.clear();
                write_html(&v, lang, Some(&t), &mut out);
                assert!(out.len() <= html_max_len(&v, lang, Some(&t)));
                out.clear();
                write_json(&v, &mut out);
                assert!(out.len() <= json_max_len(&v));
            }
        }
    }
}

#[test]
fn templates_never_panic() {
    let mut x: u64 = 0x1234_5678;
    let pieces = [
        "{", "}", "{{", "}}", " ", "position", "room", "é", "日本", "x", "<", "&",
    ];
    let v = view(ViewStatus::Waiting);
    for _ in 0..5_000 {
        let mut t = String::new();
        for _ in 0..(x % 20) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            t.push_str(pieces[(x % pieces.len() as u64) as usize]);
        }
        let _ = check_template(&t);
        let _ = render_html(&v, Lang::Ja, Some(&t));
        let _ = wants_json(Some(t.as_bytes()));
        let _ = pick_lang(Some(t.as_bytes()));
        x = x.wrapping_add(1);
    }
}

fn challenge_view() -> WaitView<'static> {
    let mut v = view(ViewStatus::Challenge);
    v.challenge = Some(([b'Q'; crate::challenge::SEED_CHARS], 18));
    v
}

/// A custom page with `{{challenge_script}}` answers the challenge itself: the script gets the
/// seed, the bits and the proof cookie's name, then the solver. On any other answer the
/// challenge's placeholders write nothing.
#[test]
fn a_custom_page_hosts_the_challenge() {
    let t = "<h1>{{room}}</h1>{{challenge_script}}<p>{{challenge_bits}} {{challenge_seed}}</p>";
    assert!(check_template(t).is_ok());
    assert!(Template::compile(t).hosts_challenge());
    let seed = "Q".repeat(crate::challenge::SEED_CHARS);
    let out = render_html(&challenge_view(), Lang::En, Some(t));
    let head = format!(
        "<h1>shop</h1><script>window.SL={{seed:'{seed}',bits:18,cookie:'smart_limit_shop_proof'}};</script>\n<script id=\"sl-pow\""
    );
    assert!(out.starts_with(&head), "{out}");
    assert!(
        out.ends_with(&format!("</script>\n<p>18 {seed}</p>")),
        "{out}"
    );
    let out = render_html(&view(ViewStatus::Waiting), Lang::En, Some(t));
    assert_eq!(out, "<h1>shop</h1><p> </p>");
}

/// A page without the solver is not used for the challenge (the browser would wait out its
/// no-script time): the built-in challenge page answers. Its other answers are the page's.
#[test]
fn a_page_without_the_solver_leaves_the_challenge_to_the_builtin_page() {
    let t = "<h1>mine {{position}} {{challenge_bits}}</h1>";
    assert!(!Template::compile(t).hosts_challenge());
    let out = render_html(&challenge_view(), Lang::En, Some(t));
    assert!(!out.contains("mine"), "{out}");
    assert!(out.contains("<script id=\"sl-pow\""), "{out}");
    assert!(out.contains("cookie:'smart_limit_shop_proof'"), "{out}");
    assert_eq!(
        render_html(&view(ViewStatus::Waiting), Lang::En, Some(t)),
        "<h1>mine 12 </h1>"
    );
}

/// The built-in challenge page and a custom one are within their announced sizes.
#[test]
fn max_len_bounds_the_challenge() {
    let mut v = challenge_view();
    v.room = "<&\"'>";
    v.refresh_secs = u64::MAX;
    v.updated_at = u64::MAX;
    let t = Template::compile("{{challenge_script}}{{challenge_script}}{{room}}{{challenge_seed}}");
    for lang in [Lang::En, Lang::Ja] {
        for tpl in [None, Some(&t)] {
            let mut out = Vec::new();
            write_html(&v, lang, tpl, &mut out);
            assert!(!out.is_empty());
            assert!(out.len() <= html_max_len(&v, lang, tpl));
        }
    }
}

/// The script of a page rendered from the built-in templates: the text between the background
/// script's start and its end, or None.
fn background_script(html: &str) -> Option<&str> {
    let start = html.find("<script>(function(R,T){")?;
    let len = html.get(start..)?.find("</script>")?;
    html.get(start..start + len)
}

/// Issue 51: every built-in page that waits for something carries the background script (it
/// polls while hidden and refreshes on coming back), with the refresh interval and its texts in
/// the page's language; the admitted and challenge pages do not. The meta refresh stays, for
/// browsers without script.
#[test]
fn waiting_pages_carry_the_background_script() {
    for lang in [Lang::En, Lang::Ja] {
        for status in [
            ViewStatus::Waiting,
            ViewStatus::Prequeue,
            ViewStatus::Closed,
            ViewStatus::Throttled,
        ] {
            let html = render_html(&view(status), lang, None);
            let script = background_script(&html).unwrap_or_else(|| panic!("{status:?}: {html}"));
            assert!(html.contains("<meta http-equiv=\"refresh\" content=\"20\">"));
            // The refresh interval, then the texts, as the script's arguments.
            let args = match lang {
                Lang::En => "})(20,{t:'It\\'s your turn: opening the site',b:'The site opens",
                Lang::Ja => "})(20,{t:'順番が来ました：サイトを開きます',b:'お待ちいただいたタブで",
            };
            assert!(script.contains(args), "{lang:?} {status:?}: {script}");
            // What it does: hidden polls as JSON, wakes on the lifecycle's events, the hold.
            for part in [
                "fetch(location.href,{headers:{Accept:'application/json'},credentials:'same-origin',cache:'no-store'})",
                "addEventListener('visibilitychange'",
                "addEventListener('resume',soon)",
                "addEventListener('online',soon)",
                "addEventListener('pageshow'",
                "w.stop()",
                "held=Date.now()+15e3",
                "Math.max(Date.now(),last+2e3)",
                "new N(T.t,{body:T.b",
            ] {
                assert!(script.contains(part), "{part}");
            }
            // Nothing in it closes the script early or leaves the page.
            assert!(
                !script.contains("</") && !script.contains("<!--"),
                "{script}"
            );
            assert_eq!(script.matches("<script").count(), 1, "{script}");
            assert!(!script.contains("http"), "{script}");
        }
        for status in [ViewStatus::Admitted, ViewStatus::Challenge] {
            let mut v = view(status);
            v.challenge = Some(([b'Q'; crate::challenge::SEED_CHARS], 18));
            let html = render_html(&v, lang, None);
            assert!(background_script(&html).is_none(), "{status:?}");
            assert!(!html.contains("sl-notify"), "{status:?}");
        }
    }
    // The interval follows the refresh, at least 1 s as the meta refresh's.
    let mut v = view(ViewStatus::Waiting);
    v.refresh_secs = 0;
    let html = render_html(&v, Lang::En, None);
    assert!(background_script(&html).is_some_and(|s| s.contains("})(1,{t:")));
}

/// Issue 51: the notification button, where a turn is ahead (waiting, pre-queue), in the page's
/// language, hidden until the script finds notifications it may ask for; the texts it shows
/// once allowed are the script's.
#[test]
fn the_notification_button_is_in_both_languages_and_hidden_without_script() {
    for (lang, button, on) in [
        (
            Lang::En,
            "<p id=\"sl-notify\" hidden><button type=\"button\">Notify me when it's my turn</button></p>",
            "o:'You will get a notification when it\\'s your turn'",
        ),
        (
            Lang::Ja,
            "<p id=\"sl-notify\" hidden><button type=\"button\">順番が来たら通知する</button></p>",
            "o:'順番が来たら通知でお知らせします'",
        ),
    ] {
        for status in [ViewStatus::Waiting, ViewStatus::Prequeue] {
            let html = render_html(&view(status), lang, None);
            assert!(html.contains(button), "{lang:?} {status:?}: {html}");
            assert!(html.contains(on), "{lang:?} {status:?}");
            // The button comes before the script that finds it.
            assert!(html.find(button) < html.find("<script>(function(R,T){"));
        }
        for status in [ViewStatus::Closed, ViewStatus::Throttled] {
            let html = render_html(&view(status), lang, None);
            assert!(!html.contains("sl-notify\""), "{lang:?} {status:?}");
            assert!(!html.contains(button), "{lang:?} {status:?}");
        }
    }
    // The button's wish is asked for with the person's click, and checked before notifying.
    let html = render_html(&view(ViewStatus::Waiting), Lang::En, None);
    let script = background_script(&html).unwrap_or_default();
    assert!(script.contains("b.onclick=function(){var q=N.requestPermission(got)"));
    assert!(script.contains("N.permission!='denied'"));
    assert!(script.contains("if(asked&&N&&N.permission=='granted')"));
}

/// The page's texts become JavaScript strings that stay inside their quotes and their script.
#[test]
fn texts_become_safe_script_strings() {
    use super::builtin::js_string;
    assert_eq!(js_string("plain"), "'plain'");
    assert_eq!(js_string("it's"), "'it\\'s'");
    assert_eq!(js_string("a\\b"), "'a\\\\b'");
    assert_eq!(js_string("</script>"), "'\\x3c/script>'");
    assert_eq!(js_string("two\nlines"), "'two\\nlines'");
    assert_eq!(js_string("順番"), "'順番'");
}
