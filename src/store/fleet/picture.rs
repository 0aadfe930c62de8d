//! Requests of a synced node that wait, suspended on nginx's loop and bounded in looks: for a
//! picture (a new node's first, [S21], and a turn at the tick for the next one), and for the
//! answer of the pool draw another request sent.

use smart_limit_core::fleet::Waiter;
use smart_limit_core::room::Visit;

use super::{visited, FleetStore, Step, Visited, DRAW_WAIT, FIRST_PICTURE_LOOK};
use crate::clock::now_ms;
use crate::store::{Answer, Decision, StoreError, Zone};
use smart_limit_core::fleet::FleetVerdict;

impl Zone {
    /// [S21] The node has no picture yet: the request waits for the node's first sync (sent
    /// now unless one is out), suspended, and is decided by the picture it brings; at most
    /// `timeout=` (the sync's own bound) and a look. Only when no sync can bring one (it
    /// failed, or the connection backs off after a failure) does the on_error policy decide.
    pub(super) fn fleet_first_picture(
        &'static self,
        fs: &'static FleetStore,
        v: Visit,
        w: Waiter,
        now: u64,
    ) -> Answer<Result<Decision, StoreError>> {
        if !self.first_sync_out(now) {
            return Answer::Now(self.fleet_decided(Step::Unknown, v, now));
        }
        let timeout = self.params.timeout_ms;
        // Counted in looks, not read off a clock: the wait is bounded whatever the clocks do.
        let looks = timeout.div_ceil(FIRST_PICTURE_LOOK.as_millis() as u64) + 1;
        Answer::Later(Box::pin(async move {
            let mut now = now;
            for _ in 0..looks {
                ngx::async_::sleep(FIRST_PICTURE_LOOK).await;
                now = now_ms();
                let limits = self.limits_at(now);
                let cfg = fs.cfg_under(&limits);
                let seen = self.shm.with_fleet(|room, node| {
                    if !node.synced() {
                        return None;
                    }
                    if let Some(admit) = room.admitted_already(&v, now, &limits) {
                        return Some(Visited::Decided(Step::Done(admit), None));
                    }
                    let verdict = node.decide(w, now, &cfg);
                    let draw = self.draw_to_send(fs, node, now, &cfg);
                    Some(visited(room, &v, verdict, draw, now))
                })?;
                // The first picture may have had no share for this node (the sync that
                // brought it was sent before the node saw anyone): the client whose turn it is
                // waits for the pool's answer and claims its place, as on any visit. Told to
                // come back instead, it found the cursor set to its own arrival and everyone
                // behind it waited a whole interval (t/274's first round).
                if let Some(decided) = self.carry_out(fs, v, seen, now).await {
                    return decided;
                }
                if !self.first_sync_out(now) {
                    break;
                }
            }
            self.fleet_decided(Step::Unknown, v, now)
        }))
    }

    /// [`FleetVerdict::NextPicture`]: a client whose turn it is came as the node's picture
    /// ends. The request waits, suspended, for the next picture (the node's sync at the tick
    /// brings it a few ms on; looks, at most `picture_edge_ms` past the picture's end),
    /// and is decided by it as on any visit: a place of the node's, or the pool's answer to
    /// the draw it sends. Past the bound it is decided by the picture there is.
    pub(super) fn fleet_next_picture(
        &'static self,
        fs: &'static FleetStore,
        v: Visit,
        w: Waiter,
        window: u64,
        now: u64,
    ) -> Answer<Result<Decision, StoreError>> {
        let cfg = fs.cfg_under(&self.limits_at(now));
        let look = FIRST_PICTURE_LOOK.as_millis() as u64;
        // Counted in looks, not read off a clock: the wait is bounded whatever the clocks do.
        let looks = (2 * cfg.picture_edge_ms()).div_ceil(look) + 1;
        Answer::Later(Box::pin(async move {
            let mut now = now;
            for left in (0..looks).rev() {
                ngx::async_::sleep(FIRST_PICTURE_LOOK).await;
                now = now_ms();
                let limits = self.limits_at(now);
                let cfg = fs.cfg_under(&limits);
                let seen = self.shm.with_fleet(|room, node| {
                    if node.picture_window() == window && left > 0 {
                        return None;
                    }
                    if let Some(admit) = room.admitted_already(&v, now, &limits) {
                        return Some(Visited::Decided(Step::Done(admit), None));
                    }
                    let verdict = node.decide(w, now, &cfg);
                    let draw = self.draw_to_send(fs, node, now, &cfg);
                    Some(visited(room, &v, verdict, draw, now))
                })?;
                if let Some(decided) = self.carry_out(fs, v, seen, now).await {
                    return decided;
                }
            }
            self.fleet_decided(Step::Unknown, v, now)
        }))
    }

    /// What a look found, carried out: the draw it sent waited for (at most [`DRAW_WAIT`]) and
    /// the place claimed, or the decision (with a draw for others sent); None: look again.
    async fn carry_out(
        &'static self,
        fs: &'static FleetStore,
        v: Visit,
        seen: Option<Visited>,
        now: u64,
    ) -> Option<Result<Decision, StoreError>> {
        match seen? {
            Visited::Drawing(d) => {
                let want = d.ask.want;
                let draw = self.fleet_draw(fs, d, now);
                Some(self.claim_drawn(fs, v, want, draw).await)
            }
            Visited::Decided(step, draw) => {
                if let Some(d) = draw {
                    self.draw_for_later(fs, d, now);
                }
                Some(self.fleet_decided(step, v, now))
            }
            Visited::NextPicture(_) | Visited::AwaitDraw => None,
        }
    }

    /// A client whose turn it is, turned away while another request's pool draw is out (one
    /// per node, asking for every such client): the request waits, suspended, for that
    /// draw's answer (looks, at most [`DRAW_WAIT`]), then claims a place it brought as the
    /// drawing client does, or sends the next draw and waits for that one. Told to come back
    /// a refresh later instead, the first such client held the node's cursor at its arrival
    /// ([`FleetNode::decide`]: nobody who came later is let in ahead of it), and a node that
    /// met a crowd told every newcomer after it to wait for a second while the pool held
    /// places (the rehearsal's first fill: 1-2 s against 0.25 s on one node).
    ///
    /// [`FleetNode::decide`]: smart_limit_core::fleet::FleetNode::decide
    pub(super) fn fleet_await_draw(
        &'static self,
        fs: &'static FleetStore,
        v: Visit,
        now: u64,
    ) -> Answer<Result<Decision, StoreError>> {
        let look = FIRST_PICTURE_LOOK.as_millis() as u64;
        // Counted in looks, not read off a clock: the wait is bounded whatever the clocks do.
        let looks = (DRAW_WAIT.as_millis() as u64).div_ceil(look) + 1;
        Answer::Later(Box::pin(async move {
            let mut now = now;
            for left in (0..looks).rev() {
                ngx::async_::sleep(FIRST_PICTURE_LOOK).await;
                now = now_ms();
                let limits = self.limits_at(now);
                let cfg = fs.cfg_under(&limits);
                let seen = self.shm.with_fleet(|room, node| {
                    if node.draw_out(now, &cfg) && left > 0 {
                        return None;
                    }
                    if let Some(admit) = room.admitted_already(&v, now, &limits) {
                        return Some(Visited::Decided(Step::Done(admit), None));
                    }
                    let verdict = node.claim(v.sid, v.arrival, now, &cfg);
                    if verdict != FleetVerdict::Admit {
                        if let Some(d) = self.draw_to_send(fs, node, now, &cfg) {
                            return Some(Visited::Drawing(d));
                        }
                    }
                    Some(visited(room, &v, verdict, None, now))
                })?;
                if let Some(decided) = self.carry_out(fs, v, seen, now).await {
                    return decided;
                }
            }
            self.fleet_decided(Step::Unknown, v, now)
        }))
    }

    /// Whether a sync that may bring the node's first picture is out: one sent within
    /// `timeout=` by any worker, or one this worker sends now.
    fn first_sync_out(&'static self, now: u64) -> bool {
        let timeout = self.params.timeout_ms;
        let pending = self
            .shm
            .with_fleet(|_, node| node.first_sync_pending(now, timeout));
        matches!(pending, Ok(true)) || crate::sync::send_now(self)
    }
}
