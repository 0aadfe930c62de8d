//! The page's words in English and Japanese, and the estimated wait as text.

use super::Lang;
use crate::util::out::Out;

/// The human estimate of the wait: "about 3 minutes" / 「約3分」, "calculating…" / 「計算中」
/// when unknown. Written without escaping (it holds no markup characters).
pub(super) fn put_eta_text(out: &mut impl Out, eta_secs: Option<u64>, lang: Lang) {
    let Some(secs) = eta_secs else {
        return out.put(match lang {
            Lang::En => "calculating…".as_bytes(),
            Lang::Ja => "計算中".as_bytes(),
        });
    };
    let minutes = secs.saturating_add(30) / 60;
    let hours = minutes.saturating_add(30) / 60;
    let (before, n, after): (&str, Option<u64>, &str) = match lang {
        Lang::En => match secs {
            0 => ("any moment now", None, ""),
            1 => ("about 1 second", None, ""),
            2..=59 => ("about ", Some(secs), " seconds"),
            60..=89 => ("about 1 minute", None, ""),
            _ if minutes < 120 => ("about ", Some(minutes), " minutes"),
            _ => ("about ", Some(hours), " hours"),
        },
        Lang::Ja => match secs {
            0 => ("まもなく", None, ""),
            1..=59 => ("約", Some(secs), "秒"),
            _ if minutes < 120 => ("約", Some(minutes), "分"),
            _ => ("約", Some(hours), "時間"),
        },
    };
    out.put(before.as_bytes());
    if let Some(n) = n {
        out.put_u64(n);
    }
    out.put(after.as_bytes());
}

/// [`put_eta_text`] into a new string.
pub fn eta_text(eta_secs: Option<u64>, lang: Lang) -> String {
    let mut out = Vec::with_capacity(32);
    put_eta_text(&mut out, eta_secs, lang);
    String::from_utf8(out).unwrap_or_default()
}

/// Texts of the default page in one language.
pub(super) struct Texts {
    pub(super) lang: &'static str,
    pub(super) waiting_title: &'static str,
    pub(super) waiting_lead: &'static str,
    pub(super) position_label: &'static str,
    pub(super) position_unknown: &'static str,
    pub(super) position_suffix: &'static str,
    pub(super) eta_label: &'static str,
    pub(super) queue_label: &'static str,
    pub(super) queue_suffix: &'static str,
    pub(super) closed_title: &'static str,
    pub(super) closed_lead: &'static str,
    pub(super) throttled_title: &'static str,
    pub(super) throttled_lead: &'static str,
    pub(super) admitted_title: &'static str,
    pub(super) admitted_lead: &'static str,
    pub(super) prequeue_title: &'static str,
    /// Before and after the start's time.
    pub(super) prequeue_lead: (&'static str, &'static str),
    pub(super) challenge_title: &'static str,
    pub(super) challenge_lead: &'static str,
    /// Without JavaScript: before and after the seconds until the page comes back.
    pub(super) challenge_noscript: (&'static str, &'static str),
    pub(super) updated: &'static str,
    /// The tab's title once the person's turn came while the tab was in the background, and
    /// the browser notification's title.
    pub(super) turn_title: &'static str,
    /// The notification's body.
    pub(super) turn_body: &'static str,
    /// The button that asks for a notification, and what it says once allowed.
    pub(super) notify_button: &'static str,
    pub(super) notify_on: &'static str,
}

const EN: Texts = Texts {
    lang: "en",
    waiting_title: "The site is busy right now",
    waiting_lead: "To keep the site working for everyone, visitors are admitted in order of \
                   arrival. You will be taken to the site automatically when it is your turn.",
    position_label: "Your place in line",
    position_unknown: "Checking…",
    position_suffix: "",
    eta_label: "Estimated wait",
    queue_label: "People in line",
    queue_suffix: "",
    throttled_title: "Many visitors from your network",
    throttled_lead: "Lots of people are arriving from the same network as you, so places in line \
                     are handed out a few at a time. This page takes yours by itself in a moment.",
    closed_title: "Temporarily closed",
    closed_lead:
        "The site is not letting visitors in right now. Please try again in a little while.",
    admitted_title: "It's your turn",
    admitted_lead: "Taking you to the site now. If nothing happens, reload this page.",
    challenge_title: "Checking your browser",
    challenge_lead: "Before you take your place in line, your browser solves a small puzzle. \
                     It takes a few seconds, once, and keeps scripts from taking the places \
                     of people.",
    challenge_noscript: (
        "Your browser does not run JavaScript: this page comes back by itself in ",
        " seconds and takes your place then.",
    ),
    prequeue_title: "Opening soon",
    prequeue_lead: (
        "The line opens at ",
        " UTC. Everyone on this page before then gets a place by a random draw at the start, \
         so coming earlier gives no advantage. Keep this tab open: it takes you on by itself.",
    ),
    updated: "Updated",
    turn_title: "It's your turn: opening the site",
    turn_body: "The site opens in your waiting tab in a few seconds. Click to go there now.",
    notify_button: "Notify me when it's my turn",
    notify_on: "You will get a notification when it's your turn",
};

const JA: Texts = Texts {
    lang: "ja",
    waiting_title: "ただいま混雑しています",
    waiting_lead: "アクセスが集中しているため、到着順にご案内しています。\
                   順番が来ると自動的にサイトへ移動します。",
    position_label: "あなたの順番",
    position_unknown: "確認中",
    position_suffix: "番目",
    eta_label: "待ち時間の目安",
    queue_label: "お待ちの人数",
    queue_suffix: "人",
    throttled_title: "同じネットワークからのアクセスが集中しています",
    throttled_lead: "同じネットワークから多くの方がアクセスしているため、順番待ちの受付を少しずつ行っています。\
                     このページが自動で順番を取得しますので、そのままお待ちください。",
    closed_title: "ただいま受付を一時停止しています",
    closed_lead: "ご不便をおかけして申し訳ありません。しばらくしてから、もう一度アクセスしてください。",
    admitted_title: "お待たせしました",
    admitted_lead: "順番が来ました。まもなくサイトへ移動します。表示が変わらない場合は、ページを再読み込みしてください。",
    challenge_title: "ブラウザを確認しています",
    challenge_lead: "列に並ぶ前に、ブラウザが小さな計算問題を解きます。数秒で一度だけ終わり、\
                     プログラムによる順番の横取りを防ぎます。",
    challenge_noscript: (
        "JavaScriptが無効のため、このページは",
        "秒後に自動で更新され、そのときに列に並びます。",
    ),
    prequeue_title: "まもなく受付を開始します",
    prequeue_lead: (
        "受付開始は",
        "（UTC）です。開始時刻までにこのページを開いている方の順番は、開始時に抽選で決まります。\
         早く来ても有利にはなりません。タブを閉じずにお待ちください。",
    ),
    updated: "最終更新",
    turn_title: "順番が来ました：サイトを開きます",
    turn_body: "お待ちいただいたタブで、まもなくサイトが開きます。クリックするとすぐに移動します。",
    notify_button: "順番が来たら通知する",
    notify_on: "順番が来たら通知でお知らせします",
};

pub(super) fn texts(lang: Lang) -> &'static Texts {
    match lang {
        Lang::En => &EN,
        Lang::Ja => &JA,
    }
}
