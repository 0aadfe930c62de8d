//! A request's fate, chosen once from the room's decision and delivered in one place: the
//! ticket its cookie carries from now on, what it records (for `$smart_limit_*`, the log and
//! the header filter), and its answer. The functions that choose (answers.rs, documents.rs)
//! decide and log; only [`deliver`] writes the cookie, records and answers.

#[allow(clippy::wildcard_imports)]
use super::*;

/// What a request gets.
pub(super) struct Fate {
    /// The ticket the cookie carries from now on (None: left as it is).
    pub ticket: Option<Ticket>,
    pub outcome: Outcome,
    /// The waiting position shown (`$smart_limit_position`).
    pub position: Option<u64>,
    /// The admitted session (what a revoke ends).
    pub sid: Option<u64>,
    /// The admitted ticket it goes on with (what `$smart_limit_token` says, [S28]).
    pub admitted: Option<Ticket>,
    pub reply: Reply,
}

/// The answer itself.
pub(super) enum Reply {
    /// The request goes on (to `limit_req`, the origin).
    GoOn,
    /// Let in: on a poll location the "admitted" answer, elsewhere the request goes on.
    LetIn,
    /// `307` back to the same URL with the ticket: the cookie check.
    CookieCheck,
    /// The waiting answer (the page or its JSON), under the event's page if it has one.
    Waiting {
        view: WaitView<'static>,
        page: Option<Rc<Template>>,
    },
    /// An admitted session over its request rate: `429` with `Retry-After` (seconds).
    TooMany { retry_secs: u64 },
    /// [S29] A page's asset from a client that is not admitted: the bare waiting status.
    AssetRefused,
    /// [S28] An invite-only line without a valid enqueue token: the "invite only" answer.
    InviteOnly,
    /// The room could not decide and the request is refused (500).
    Fail,
}

impl Fate {
    /// Recorded as `outcome`, the cookie left as it is, and `reply`.
    pub fn of(outcome: Outcome, reply: Reply) -> Fate {
        Fate {
            ticket: None,
            outcome,
            position: None,
            sid: None,
            admitted: None,
            reply,
        }
    }
}

/// Delivers `fate`: the cookie, the record, then the answer (a response the module sends
/// ends the request here).
pub(super) fn deliver(
    r: &mut Request,
    lcf: &LocConf,
    zone: &'static Zone,
    now: u64,
    fate: Fate,
) -> ngx_int_t {
    if let Some(t) = fate.ticket {
        cookie::set_ticket(r, zone, &t);
    }
    record(
        r,
        Decided {
            zone,
            outcome: fate.outcome,
            position: fate.position,
            sid: fate.sid,
            admitted: fate.admitted,
        },
    );
    match fate.reply {
        Reply::GoOn => DECLINED,
        Reply::LetIn if lcf.poll => {
            let rc = poll::admitted_answer(r, lcf, zone, now);
            finish(r, rc)
        }
        Reply::LetIn => DECLINED,
        Reply::CookieCheck => {
            let rc = answer::cookie_check(r);
            finish(r, rc)
        }
        Reply::Waiting { view, page } => {
            let rc = answer::waiting(r, lcf, page.as_deref(), &view);
            finish(r, rc)
        }
        Reply::TooMany { retry_secs } => {
            let mut n = itoa::Buffer::new();
            r.add_static_header("Retry-After", HeaderValue::Copied(n.format(retry_secs)));
            NGX_HTTP_TOO_MANY_REQUESTS as ngx_int_t
        }
        Reply::AssetRefused => {
            let rc = answer::asset_refused(r, lcf);
            finish(r, rc)
        }
        Reply::InviteOnly => {
            let rc = answer::invite_only(r, &zone.params.name, zone.params.invite_status);
            finish(r, rc)
        }
        Reply::Fail => INTERNAL_ERROR,
    }
}

impl Turn<'_> {
    /// [`deliver`] for this decision's room.
    pub(super) fn deliver(&self, r: &mut Request, fate: Fate) -> ngx_int_t {
        deliver(r, self.lcf, self.zone, self.now, fate)
    }
}

/// The module answered the request itself: it ends here (the phases go no further).
fn finish(r: &mut Request, rc: ngx_int_t) -> ngx_int_t {
    // SAFETY: a live request that this handler answered; nginx's own finalization.
    unsafe { ngx_http_finalize_request(r.into(), rc) };
    Status::NGX_DONE.0
}

/// Records the decision in the request's context (for `$smart_limit_*` and the filter).
fn record(r: &mut Request, decided: Decided) {
    if let Some(ctx) = RequestCtx::get_or_insert(r) {
        ctx.decided = Some(decided);
    }
}
