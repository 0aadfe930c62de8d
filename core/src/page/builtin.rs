//! The built-in waiting pages (English and Japanese, each status, with and without a known
//! position), prepared once per process, and the HTML answer written from them or from an
//! operator's template.

use super::template::Slot;
use super::template::Template;

use super::text::texts;
use super::{Lang, ViewStatus, WaitView};
use crate::util::out::Out;

/// Inline style sheet of the default page: responsive card, large position, dark mode, and
/// a small pulse that stops for people who prefer reduced motion.
const STYLE: &str = "\
:root{color-scheme:light dark;--bg:#f4f6f9;--card:#fff;--fg:#1b2230;--muted:#586275;--accent:#1f56d6;--line:#dfe3ea}
@media (prefers-color-scheme:dark){:root{--bg:#10141a;--card:#1a2029;--fg:#e7eaf0;--muted:#a3adbd;--accent:#82a8ff;--line:#2d3542}}
*{box-sizing:border-box}
html,body{margin:0}
body{min-height:100vh;display:flex;align-items:center;justify-content:center;padding:1rem;background:var(--bg);color:var(--fg);font:16px/1.6 system-ui,-apple-system,\"Segoe UI\",Roboto,\"Hiragino Sans\",\"Noto Sans JP\",Meiryo,sans-serif}
main{width:100%;max-width:34rem;padding:2rem 1.5rem;text-align:center;background:var(--card);border:1px solid var(--line);border-radius:16px;box-shadow:0 2px 8px rgba(0,0,0,.06)}
h1{margin:0 0 .75rem;font-size:1.45rem;line-height:1.3}
p{margin:.5rem 0}
.lead{color:var(--muted)}
.pos{margin:1.75rem 0 1.25rem}
.pos-label{font-size:.95rem;color:var(--muted)}
.pos-num{font-size:clamp(3rem,16vw,5.5rem);font-weight:700;line-height:1.1;color:var(--accent);font-variant-numeric:tabular-nums}
.pos-num.unknown{font-size:2rem;line-height:2}
.pos-unit{margin-left:.15em;font-size:1.25rem;font-weight:600;color:var(--fg)}
dl{display:grid;grid-template-columns:1fr 1fr;gap:.75rem;margin:1.25rem 0}
dl div{padding:.75rem;border:1px solid var(--line);border-radius:12px}
dt{font-size:.85rem;color:var(--muted)}
dd{margin:0;font-size:1.1rem;font-weight:600}
.note{font-size:.9rem;color:var(--muted)}
button{font:inherit;font-size:.95rem;padding:.45rem 1.1rem;border:1px solid var(--line);border-radius:999px;background:var(--card);color:var(--accent);cursor:pointer}
button:disabled{color:var(--muted);cursor:default}
.dot{display:inline-block;width:.55em;height:.55em;margin-right:.45em;border-radius:50%;background:var(--accent);vertical-align:.05em;animation:pulse 1.6s ease-in-out infinite}
@keyframes pulse{50%{opacity:.2}}
@media (prefers-reduced-motion:reduce){.dot{animation:none}}
@media (max-width:26rem){dl{grid-template-columns:1fr}main{padding:1.5rem 1rem}}
";

// ---------------------------------------------------------------------------------------
// Templates
// ---------------------------------------------------------------------------------------

/// The pre-queue page's countdown to the start (no external resources; without script the
/// page's refresh does the same).
const COUNTDOWN: &str = "<script>(function(){var e=document.getElementById('countdown'),\
t=Date.parse(document.getElementById('starts').getAttribute('datetime'));function f(){\
var s=Math.max(0,Math.round((t-Date.now())/1000)),h=Math.floor(s/3600),m=Math.floor(s%3600/60);\
e.textContent=(h?h+':'+(m<10?'0':''):'')+m+':'+(s%60<10?'0':'')+s%60;}f();setInterval(f,1000);})();\
</script>\n";

/// How the built-in page keeps its place when it is not in front (issue 51): a browser throttles
/// the timers of a background tab, freezes it after a while, and a phone stops it outright, so
/// the `<meta http-equiv="refresh">` alone may come back late, and when the turn comes in a
/// background tab the site loads where nobody sees it. The page stays what it is without
/// script (the meta refresh does everything); with script, and only around the tab's
/// lifecycle:
///
/// - In front, nothing changes: the meta refresh reloads the page, which admits and shows the
///   site when the turn has come.
/// - Hidden, the script cancels the meta refresh (`window.stop()`, after the load) and polls
///   the same URL as a program would (`Accept: application/json`), at the refresh interval
///   (the page's, then each answer's `refresh_seconds`): a poll is a fraction of a page, and the
///   turn is noticed by the page instead of a reload nobody watches. The polls keep the place's
///   presence ([S27]) as the reloads did.
/// - Coming back (`visibilitychange`, `resume` after a freeze, `pageshow` from the back-forward
///   cache, `online`) refreshes at once: a reload in front, a poll while still hidden; never
///   sooner than 2 s after the page's last request, so a flapping tab cannot storm the room.
/// - The next poll is a deadline on the wall clock (`Date.now()`), checked on every wake: a
///   throttled or frozen timer, or a suspended machine, catches up at the first chance instead
///   of waiting out a full interval again. A wake up to 250 ms early counts as on time: a
///   background tab's timers run on a one-second grid, and one that lands a millisecond before
///   the deadline by the wall clock would otherwise wait a whole extra second. The timer is set
///   again from each answer's task, not from the timer before it: Chrome throttles chains of
///   timers in a tab hidden for minutes hardest (once a minute), and the deadline covers
///   whatever throttling is left.
/// - The turn: the room lets the poll through (on a normal location the origin answers it,
///   with the admitted ticket; a `smart_limit_poll` location answers `"status":"admitted"`).
///   Any answer that is not the room's JSON and not an error (5xx, 429) means the same. The tab's
///   title then says so, a notification says so too if the person asked for one with the
///   page's button, and the page goes on to the site (a reload): at once when the tab comes to
///   front or the notification is clicked, and after 15 s in any case, well within the default
///   `active_window` (1 min), so the admission is used before it would stop counting.
/// - The button shows only where the Notification API exists and is not denied; the person's
///   click asks for the permission, and the wish is kept for the tab (`sessionStorage`) since
///   the page reloads every refresh while in front.
///
/// The refresh interval follows as the first argument (a slot), the texts as the second.
const BACKGROUND: &str = "<script>(function(R,T){\
var d=document,w=window,N=w.Notification,K='smart_limit_notify',last=Date.now(),due=last+R*1e3,\
timer=0,busy=0,held=0,gone=0,quiet=0,asked=0,p=d.getElementById('sl-notify'),b;\
try{asked=sessionStorage.getItem(K)=='1'}catch(e){}\
function hid(){return d.visibilityState=='hidden'}\
function arm(t){clearTimeout(timer);timer=setTimeout(wake,Math.max(0,t-Date.now()))}\
function go(){if(!gone){gone=1;clearTimeout(timer);location.reload()}}\
function wake(){if(gone)return;var t=Date.now();\
if(held){if(t>held-250||!hid())go();else arm(held);return}\
if(t<due-250)arm(due);else if(hid())poll();else go()}\
function soon(){due=Math.min(due,Math.max(Date.now(),last+2e3));wake()}\
function hide(){if(!quiet){quiet=1;if(d.readyState=='complete')w.stop();\
else w.addEventListener('load',function(){w.stop()})}wake()}\
function turn(){if(held)return;held=Date.now()+15e3;d.title=T.t;\
if(asked&&N&&N.permission=='granted')try{new N(T.t,{body:T.b,tag:'smart-limit'}).onclick=\
function(){try{w.focus()}catch(e){}go()}}catch(e){}wake()}\
function poll(){var t=Date.now();last=t;due=t+R*1e3;arm(due);if(t-busy<3e4)return;busy=t;\
fetch(location.href,{headers:{Accept:'application/json'},credentials:'same-origin',cache:'no-store'})\
.then(function(r){return r.json().then(null,function(){}).then(function(j){busy=0;\
if(j&&typeof j=='object'&&typeof j.status=='string'&&'room' in j){if(j.status=='admitted')turn();\
else{R=Math.max(1,+j.refresh_seconds||R);due=last+R*1e3;wake()}}\
else if(r.status<500&&r.status!=429)turn();else wake()})},function(){busy=0;wake()})}\
if(p&&N&&N.requestPermission&&N.permission!='denied'){b=p.getElementsByTagName('button')[0];\
var on=function(){b.textContent=T.o;b.disabled=true},got=function(x){if(x=='granted'){asked=1;\
try{sessionStorage.setItem(K,'1')}catch(e){}on()}else if(x=='denied')p.hidden=true};\
if(asked&&N.permission=='granted')on();\
b.onclick=function(){var q=N.requestPermission(got);if(q&&q.then)q.then(got)};p.hidden=false}\
d.addEventListener('visibilitychange',function(){if(hid())hide();else soon()});\
d.addEventListener('resume',soon);w.addEventListener('online',soon);\
w.addEventListener('pageshow',function(e){if(e.persisted)soon()});\
if(hid())hide();})(";

/// `s` as a single-quoted JavaScript string that is also safe inside `<script>` (the page's
/// own texts: built once, at configuration time).
pub(super) fn js_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        match c {
            '\'' => out.push_str("\\'"),
            '\\' => out.push_str("\\\\"),
            '<' => out.push_str("\\x3c"),
            '\n' => out.push_str("\\n"),
            _ => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// The background script ([`BACKGROUND`]) with its refresh interval and its texts.
fn background(t: &mut Template, lang: Lang) {
    let tx = texts(lang);
    t.text(BACKGROUND)
        .slot(Slot::RefreshAtLeast1)
        .text(",{t:")
        .text(&js_string(tx.turn_title))
        .text(",b:")
        .text(&js_string(tx.turn_body))
        .text(",o:")
        .text(&js_string(tx.notify_on))
        .text("});</script>\n");
}

/// The refresh note of the built-in page, with the refresh interval as a slot.
fn refresh_note(t: &mut Template, lang: Lang, status: ViewStatus) {
    let (before, after) = match (lang, status) {
        (Lang::En, ViewStatus::Waiting) => (
            "This page refreshes by itself every ",
            " seconds. Keep this tab open; reloading it yourself will not lose your place.",
        ),
        (Lang::En, ViewStatus::Closed) => ("This page checks again by itself every ", " seconds."),
        (Lang::En, ViewStatus::Throttled) => ("This page tries again by itself in ", " seconds."),
        (Lang::En, ViewStatus::Admitted) => ("This page reloads by itself in ", " seconds."),
        (Lang::En, ViewStatus::Prequeue) => ("This page checks in by itself in ", " seconds."),
        (Lang::Ja, ViewStatus::Waiting) => (
            "このページは",
            "秒ごとに自動で更新されます。タブを閉じずに、このままお待ちください\
             （再読み込みしても順番は変わりません）。",
        ),
        (Lang::Ja, ViewStatus::Closed) => ("このページは", "秒ごとに自動で再確認します。"),
        (Lang::Ja, ViewStatus::Throttled) => ("このページは", "秒後に自動で再試行します。"),
        (Lang::Ja, ViewStatus::Admitted) => ("このページは", "秒後に自動で再読み込みされます。"),
        (Lang::Ja, ViewStatus::Prequeue) => ("このページは", "秒後に自動で更新されます。"),
        // (The challenge page has its own note.)
        (_, ViewStatus::Challenge) => ("", ""),
    };
    t.text(before).slot(Slot::RefreshAtLeast1).text(after);
}

/// The built-in page for one language, status and whether the position is known: the same
/// document for every request, with the figures as slots.
pub(super) fn builtin(lang: Lang, status: ViewStatus, position_known: bool) -> Template {
    let tx = texts(lang);
    let title = match status {
        ViewStatus::Waiting => tx.waiting_title,
        ViewStatus::Closed => tx.closed_title,
        ViewStatus::Throttled => tx.throttled_title,
        ViewStatus::Admitted => tx.admitted_title,
        ViewStatus::Prequeue => tx.prequeue_title,
        ViewStatus::Challenge => tx.challenge_title,
    };
    let mut t = Template::default();
    t.text("<!DOCTYPE html>\n<html lang=\"")
        .text(tx.lang)
        .text("\">\n<head>\n<meta charset=\"utf-8\">\n")
        .text("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    // The challenge page reloads itself once solved; only without script does it come back
    // after the refresh (the slower path of a browser that runs no JavaScript).
    let (before, after) = match status {
        ViewStatus::Challenge => ("<noscript>", "</noscript>"),
        _ => ("", ""),
    };
    t.text(before)
        .text("<meta http-equiv=\"refresh\" content=\"")
        .slot(Slot::RefreshAtLeast1)
        .text("\">")
        .text(after)
        .text("\n<meta name=\"robots\" content=\"noindex, nofollow\">\n")
        .text("<meta name=\"color-scheme\" content=\"light dark\">\n<title>")
        .text(title)
        .text("</title>\n<style>\n")
        .text(STYLE)
        .text("</style>\n</head>\n<body>\n<main>\n<h1>")
        .text(title)
        .text("</h1>\n");
    match status {
        ViewStatus::Waiting => {
            t.text("<p class=\"lead\">")
                .text(tx.waiting_lead)
                .text("</p>\n")
                .text("<div class=\"pos\" role=\"status\" aria-live=\"polite\" aria-atomic=\"true\">\n")
                .text("<div class=\"pos-label\">")
                .text(tx.position_label)
                .text("</div>\n");
            if position_known {
                t.text("<div class=\"pos-num\">").slot(Slot::Position);
                if !tx.position_suffix.is_empty() {
                    t.text("<span class=\"pos-unit\">")
                        .text(tx.position_suffix)
                        .text("</span>");
                }
                t.text("</div>\n");
            } else {
                t.text("<div class=\"pos-num unknown\">")
                    .text(tx.position_unknown)
                    .text("</div>\n");
            }
            t.text("</div>\n<dl>\n<div><dt>")
                .text(tx.eta_label)
                .text("</dt><dd>")
                .slot(Slot::EtaText)
                .text("</dd></div>\n<div><dt>")
                .text(tx.queue_label)
                .text("</dt><dd>")
                .slot(Slot::QueueLength)
                .text(tx.queue_suffix)
                .text("</dd></div>\n</dl>\n");
        }
        ViewStatus::Prequeue => {
            // The start's time, and a countdown to it (the page works without script: the
            // refresh brings it back at the start).
            t.text("<p class=\"lead\" role=\"status\">")
                .text(tx.prequeue_lead.0)
                .text("<time id=\"starts\" datetime=\"")
                .slot(Slot::StartsIso)
                .text("\">")
                .slot(Slot::StartsTime)
                .text("</time>")
                .text(tx.prequeue_lead.1)
                .text("</p>\n<div class=\"pos\"><div class=\"pos-num\" id=\"countdown\"></div></div>\n")
                .text(COUNTDOWN);
        }
        ViewStatus::Challenge => {
            t.text("<p class=\"lead\">")
                .text(tx.challenge_lead)
                .text("</p>\n<div class=\"pos\" role=\"status\" aria-live=\"polite\">")
                .text("<div class=\"pos-num\" id=\"progress\">0%</div></div>\n")
                .text("<noscript><p class=\"note\">")
                .text(tx.challenge_noscript.0)
                .slot(Slot::RefreshAtLeast1)
                .text(tx.challenge_noscript.1)
                .text("</p></noscript>\n")
                .slot(Slot::ChallengeScript);
        }
        ViewStatus::Closed | ViewStatus::Admitted | ViewStatus::Throttled => {
            let lead = match status {
                ViewStatus::Closed => tx.closed_lead,
                ViewStatus::Throttled => tx.throttled_lead,
                _ => tx.admitted_lead,
            };
            t.text("<p class=\"lead\" role=\"status\" aria-live=\"polite\">")
                .text(lead)
                .text("</p>\n");
        }
    }
    if status != ViewStatus::Challenge {
        t.text("<p class=\"note\"><span class=\"dot\" aria-hidden=\"true\"></span>");
        refresh_note(&mut t, lang, status);
        t.text("</p>\n");
    }
    // The notification button, where a turn is ahead: hidden until the script shows it (a
    // browser without script, or without notifications, never sees a button that does nothing).
    if matches!(status, ViewStatus::Waiting | ViewStatus::Prequeue) {
        t.text("<p id=\"sl-notify\" hidden><button type=\"button\">")
            .text(tx.notify_button)
            .text("</button></p>\n");
    }
    t.text("<p class=\"note\">")
        .text(tx.updated)
        .text(" <time datetime=\"")
        .slot(Slot::UpdatedIso)
        .text("\">")
        .slot(Slot::UpdatedTime)
        .text(" UTC</time></p>\n</main>\n");
    // Every page that waits for something carries the background script (not the admitted
    // page, which only reloads into the site, nor the challenge page, which has its solver).
    if matches!(
        status,
        ViewStatus::Waiting | ViewStatus::Prequeue | ViewStatus::Closed | ViewStatus::Throttled
    ) {
        background(&mut t, lang);
    }
    t.text("</body>\n</html>\n");
    t
}

/// The built-in pages, prepared once per process.
fn builtin_pages() -> &'static [Template; 24] {
    static PAGES: std::sync::OnceLock<[Template; 24]> = std::sync::OnceLock::new();
    PAGES.get_or_init(|| {
        core::array::from_fn(|i| {
            let lang = if i < 12 { Lang::En } else { Lang::Ja };
            let status = match (i / 2) % 6 {
                0 => ViewStatus::Waiting,
                1 => ViewStatus::Closed,
                2 => ViewStatus::Admitted,
                3 => ViewStatus::Throttled,
                4 => ViewStatus::Prequeue,
                _ => ViewStatus::Challenge,
            };
            builtin(lang, status, i % 2 == 1)
        })
    })
}

fn builtin_index(lang: Lang, status: ViewStatus, position_known: bool) -> usize {
    let l = match lang {
        Lang::En => 0,
        Lang::Ja => 12,
    };
    let s = match status {
        ViewStatus::Waiting => 0,
        ViewStatus::Closed => 2,
        ViewStatus::Admitted => 4,
        ViewStatus::Throttled => 6,
        ViewStatus::Prequeue => 8,
        ViewStatus::Challenge => 10,
    };
    l + s + usize::from(position_known)
}

/// Prepares the built-in pages now (at configuration time) rather than on the first request.
pub fn prepare_builtin() {
    let _ = builtin_pages();
}

/// The template an HTML answer uses: the configured one, or the built-in page in `lang`.
fn html_template<'t>(
    v: &WaitView,
    lang: Lang,
    template: Option<&'t Template>,
) -> Option<&'t Template> {
    match template {
        // (The challenge needs its solver: a page without one leaves it to the built-in page.)
        Some(t) if v.status != ViewStatus::Challenge || t.hosts_challenge() => Some(t),
        _ => builtin_pages().get(builtin_index(lang, v.status, v.position.is_some())),
    }
}

/// The most bytes [`write_html`] writes for these arguments.
pub fn html_max_len(v: &WaitView, lang: Lang, template: Option<&Template>) -> usize {
    html_template(v, lang, template).map_or(0, |t| t.max_len(v.room.len()))
}

/// The HTML answer: the configured template, or the built-in page in `lang`.
pub fn write_html(v: &WaitView, lang: Lang, template: Option<&Template>, out: &mut impl Out) {
    if let Some(t) = html_template(v, lang, template) {
        t.render(v, lang, out);
    }
}

/// [`write_html`] into a new string, compiling `template` first.
pub fn render_html(v: &WaitView, lang: Lang, template: Option<&str>) -> String {
    let compiled = template.map(Template::compile);
    let mut out = Vec::with_capacity(4096);
    write_html(v, lang, compiled.as_ref(), &mut out);
    String::from_utf8(out).unwrap_or_default()
}
