//! The request path of a synced room: a visit decided on the node's own memory (the cursor
//! by arrival, this interval's share, the pool draw), and positions from the picture's
//! samples of the fleet's line.

use super::layout::{record, Seen};
use super::layout::{Sight, ACTIVE_TAG};
use super::tally::CountsView;
use super::{Sample, Sighting, WaiterSighting};

use super::{Ask, Drawn, FleetConfig, FleetNode, FleetVerdict, Waiter};
use crate::room::Counted;
use crate::util::time::window_end;

impl<'m> FleetNode<'m> {
    /// A client without a valid admitted ticket, whose place in the line dates from `arrival`
    /// (`new_place`: it takes it now).
    pub fn visit(&mut self, w: Waiter, now: u64, cfg: &FleetConfig) -> FleetVerdict {
        self.hdr.pending.polls += 1;
        if let Some(full) = self.line_full(w, cfg) {
            return full;
        }
        self.saw_waiting(w, now, cfg);
        if self.waits_for_picture(w, now, cfg) {
            return FleetVerdict::NextPicture;
        }
        self.decide(w, now, cfg)
    }

    /// Whether a client whose turn it is, with no place it may take now, waits for the node's
    /// next picture rather than be told to come back ([`FleetVerdict::NextPicture`]): the
    /// picture's interval ends within [`FleetConfig::picture_edge_ms`] (its places are used,
    /// the next picture is a sync away) or ended less than that ago (past that the sync is
    /// late, or failed, and nobody is held for it). Told to come back, a client
    /// polling at the tick itself came back a refresh later at the same phase, again before
    /// the places freed (the ten-minute rehearsal, docs/benchmarks.md run 8: the head of the
    /// line told position 1 or 2 for 7 s). Decided by the next picture, it draws from a pool
    /// that holds the places that free first.
    fn waits_for_picture(&self, w: Waiter, now: u64, cfg: &FleetConfig) -> bool {
        let window = self.hdr.pic.window_ms;
        let end = window.saturating_add(cfg.interval_ms);
        let edge = cfg.picture_edge_ms();
        let ending = now.saturating_add(edge) >= end && now < end.saturating_add(edge);
        self.synced()
            && window != 0
            && ending
            && !self.hdr.share.open(now)
            && self.eligible(w.arrival)
            && !self.band_waits(w.arrival, now, cfg)
    }

    /// The window of the node's picture (the tick its sync was for; 0: none yet), which
    /// changes when the next picture comes (or an interval passes without one).
    pub fn picture_window(&self) -> u64 {
        self.hdr.pic.window_ms
    }

    /// The decision on a visit the node has seen ([`FleetNode::visit`]): by the picture, or
    /// [`FleetVerdict::Unknown`] while the node has none. A request told `Unknown` waits for
    /// the node's first sync and asks again here (not seen a second time).
    pub fn decide(&mut self, w: Waiter, now: u64, cfg: &FleetConfig) -> FleetVerdict {
        let Waiter { sid, arrival, .. } = w;
        if !self.synced() {
            return FleetVerdict::Unknown;
        }
        if !self.eligible(arrival) {
            // Behind the node's own hold while the pool's draw is out: its turn comes with the
            // draw's answer (the held client's claim releases the cursor), so it is one of
            // those the next draw is for, and waits for this one's answer like them.
            if self.hdr.pic.hold().is_some() && self.draw_out(now, cfg) {
                self.hdr.draw.wanted(arrival);
                return self.come_back(arrival, sid, now, cfg);
            }
            return self.wait(arrival, sid, now, cfg);
        }
        if self.band_waits(arrival, now, cfg) {
            return self.come_back(arrival, sid, now, cfg);
        }
        // Its turn: its poll weighs the node's next share more (FleetNode::turn_weight).
        self.hdr.pending.turn_polled();
        if self.take_place(sid, arrival, now) {
            return FleetVerdict::Admit;
        }
        // Nothing free on the node now (what is left of its share is held for sessions that
        // have not ended): the pool's places are those that free first.
        let h = &mut *self.hdr;
        if !h.share.open(now) && (!h.draw.pool_empty(h.pic.window_ms) || h.draw.untold(arrival)) {
            h.draw.wanted(arrival);
        }
        // The picture said nobody waits, and now someone does: the place drawn for it is its
        // own.
        h.pic.hold_at(arrival);
        self.come_back(arrival, sid, now, cfg)
    }

    /// Its turn, but not a place yet: it is told its position and to come back in a moment.
    fn come_back(&self, arrival: u64, sid: u64, now: u64, cfg: &FleetConfig) -> FleetVerdict {
        match self.wait(arrival, sid, now, cfg) {
            FleetVerdict::Wait {
                position,
                queue_len,
                counted,
                ..
            } => FleetVerdict::Wait {
                position,
                queue_len,
                eta_secs: Some(0),
                counted,
            },
            other => other,
        }
    }

    /// A waiter the cursor took only as one of its band (past those the free places rightly
    /// take: see the script's cursor) may take a place from half an interval after the
    /// picture on, not before: until then the places are kept for those before it, who come
    /// back every interval while their turn holds. Without this, the band's clients took the
    /// places first as often as not, and the older ones let in after them came more than an
    /// interval earlier (the simulator, 5 nodes, a flat arrival: 7.0 % of admissions out of
    /// order with the band's places open at once, 2.5 % so, 1.3 % without the band). The
    /// places the rightful waiters take are this picture's (its samples, interpolated).
    /// A place held for a session's end (`held_back`) is the band's only half an interval
    /// after that end, for the same reason: held places free one by one through the interval,
    /// and the band, polling as often as the rest, took them as they freed; a head of the line
    /// that polls slowly was passed over for 10 s and more (rehearsals, 3 runs of 5).
    fn band_waits(&self, arrival: u64, now: u64, cfg: &FleetConfig) -> bool {
        let h = &self.hdr.pic;
        let fresh = h.aged_ranks == 0 && h.synced_at_ms != 0;
        if !fresh || h.cursor == u64::MAX {
            return false;
        }
        // (The cheap test first: past half an interval with a place open to the band, nobody
        // waits, and the line's samples need not be searched.)
        let half = cfg.interval_ms / 2;
        if now >= h.synced_at_ms + half && self.hdr.share.open(now.saturating_sub(half)) {
            return false;
        }
        // The last waiter the places rightly take is the script's (`rightful`): among those
        // present, so a kept place of someone away ([S27]) does not hold the band back.
        h.places(cfg.max_active) > 0 && arrival > h.rightful
    }

    /// The same client once the pool's answer to its draw is in (it was turned away because
    /// the node's share was used up): in if its turn still holds and a place came; otherwise
    /// it waits like anyone else. Not counted as another poll.
    pub fn claim(&mut self, sid: u64, arrival: u64, now: u64, cfg: &FleetConfig) -> FleetVerdict {
        if self.eligible(arrival) {
            if self.band_waits(arrival, now, cfg) {
                return self.come_back(arrival, sid, now, cfg);
            }
            if self.take_place(sid, arrival, now) {
                return FleetVerdict::Admit;
            }
        }
        self.wait(arrival, sid, now, cfg)
    }

    /// One place of the node's share (or of its draws), if any is left: taken by `sid`, who
    /// waited since `arrival` (it leaves the line).
    fn take_place(&mut self, sid: u64, arrival: u64, now: u64) -> bool {
        if !self.hdr.share.take(now) {
            return false;
        }
        // Nobody is ahead of the arrivals after it any more: they take the node's places (or
        // draw) as they come, as on one node, rather than wait for the next picture.
        self.hdr.pic.release(arrival);
        self.hdr.pic.took(arrival);
        let line = self.hdr.pic.samples_len as usize;
        let line = self.samples.get(..line).unwrap_or(&[]);
        self.hdr.pic.let_in_of_line(sid, line);
        self.hdr.fresh.left(arrival);
        self.admit(sid, now);
        true
    }

    /// A client the zone's failure policy let in while the node had no picture
    /// (`on_error=open`): reported as admitted, so the fleet counts its session and drops its
    /// place from the line.
    pub fn admitted_alone(&mut self, sid: u64, arrival: u64, now: u64) {
        self.hdr.fresh.left(arrival);
        self.admit(sid, now);
    }

    /// A client who must wait whatever its turn (a room in `queue_all` mode): seen and
    /// reported like any waiter, so the fleet's line stays true, and told its place.
    pub fn hold(&mut self, w: Waiter, now: u64, cfg: &FleetConfig) -> FleetVerdict {
        self.hdr.pending.polls += 1;
        if let Some(full) = self.line_full(w, cfg) {
            return full;
        }
        self.saw_waiting(w, now, cfg);
        self.wait(w.arrival, w.sid, now, cfg)
    }

    /// `max_line`: a client taking a place when the line is full (as the picture saw it, with
    /// the places taken here since) gets none. Nodes may overshoot by what they take in one
    /// interval; the script takes no waiter past `max_line` into the fleet's line.
    fn line_full(&mut self, w: Waiter, cfg: &FleetConfig) -> Option<FleetVerdict> {
        if !w.new_place || cfg.max_line == 0 {
            return None;
        }
        let in_line = self.hdr.pic.join_line(cfg.max_line)?;
        Some(FleetVerdict::LineFull { queue_len: in_line })
    }

    /// Places to ask the fleet's pool for now, if any: as many as clients whose turn it was
    /// were turned away since the last draw, one draw in flight per node (one that has not
    /// answered within an interval is given up).
    ///
    /// Once the pool was found empty, a draw goes only for a client older than any a draw
    /// came back short for since the picture: the script marks the oldest client a draw found the
    /// pool empty for (its starved mark) and keeps the pool's next place for a draw for a
    /// client at or before the mark, wherever it polls. Places are given in the order clients
    /// poll, so without this a head of the line whose polls keep one phase past the interval's
    /// start (a browser following its page's whole-second refresh; the syncs on the clock's
    /// multiples of the interval) could find its node's share and the pool used up at every
    /// poll, while clients further back took what another node had left (the ten-minute
    /// rehearsal, docs/benchmarks.md run 4: the head told position 1 for 7 s).
    pub fn take_draw(&mut self, now: u64, cfg: &FleetConfig) -> Option<Ask> {
        let h = &mut *self.hdr;
        let ask = h.draw.take(now, cfg.interval_ms, h.pic.window_ms)?;
        h.metrics.draws += 1;
        Some(ask)
    }

    /// Whether a pool draw is out: a client whose turn it is, turned away meanwhile (only one
    /// is out per node, and it asks for every such client), waits for its answer and claims
    /// a place it brought ([`FleetNode::claim`]) rather than come back a refresh later.
    pub fn draw_out(&self, now: u64, cfg: &FleetConfig) -> bool {
        self.hdr.draw.out(now, cfg.interval_ms)
    }

    /// The node's last sync sent (a draw carries it: the script refuses a draw sent before
    /// the last sync it ran).
    pub fn seq(&self) -> u64 {
        self.hdr.sync.seq
    }

    /// The pool's answer to [`FleetNode::take_draw`]: `granted` of the `asked` places (all
    /// of them when the pool had enough; otherwise it is empty until the next picture). None:
    /// no answer (Redis away): no places, and no more draws this interval.
    pub fn drawn(&mut self, asked: u64, answer: Option<Drawn>) {
        let h = &mut *self.hdr;
        // The places count only if the script ran the draw after the node's last sync sent: a
        // sync run after the draw released them (every sync gives a node's draws back), and
        // one sent since will.
        let granted = answer.filter(|d| d.seq == h.sync.seq).map(|d| d.granted);
        let got = granted.unwrap_or(0).min(asked);
        h.draw.answered(got < asked, h.pic.window_ms);
        h.metrics.draws_granted += got;
        h.share.quota_left += got;
    }

    /// A request on a valid admitted ticket: the session counts as active in the fleet. Each
    /// sync reports the sessions seen since the last one, once each, at their latest sighting
    /// (so the fleet frees a session's place when its window really ends); active sessions are
    /// at most `max_active`, so this stays cheap.
    pub fn saw_admitted(&mut self, sid: u64, now: u64, cfg: &FleetConfig) {
        let every = cfg.interval_ms.min(cfg.active_window_ms / 2);
        let key = sid ^ ACTIVE_TAG;
        let batch_seq = self.hdr.pending.batch_seq;
        let (new, at) = match self.sight(key, now, every) {
            Sight::New(at) => (true, at),
            // Seen since the last sync but reported before it: in this batch too, so the
            // fleet's last sight of a session is never older than the node's last sync.
            Sight::Recent(at) => (
                self.seen.get(at).is_none_or(|e| e.batch != batch_seq),
                Some(at),
            ),
        };
        let seen = at.and_then(|i| self.seen.get_mut(i));
        let entry = Sighting { sid, at: now };
        let h = &mut self.hdr.pending;
        if !record(
            seen,
            h.batch_seq,
            self.active,
            &mut h.n_active,
            new,
            entry,
            |e| e.sid == sid,
        ) {
            self.drop_report(key);
        }
    }

    fn eligible(&self, arrival: u64) -> bool {
        self.hdr.pic.eligible(arrival)
    }

    pub(super) fn admit(&mut self, sid: u64, now: u64) {
        let h = &mut *self.hdr;
        h.metrics.admitted += 1;
        let entry = Sighting { sid, at: now };
        if !record(
            None,
            0,
            self.admitted,
            &mut h.pending.n_admitted,
            true,
            entry,
            |_| false,
        ) {
            h.metrics.dropped += 1;
        }
    }

    /// A waiting client seen: reported to the fleet, and a place it takes now kept among the
    /// newcomers the picture cannot show.
    fn saw_waiting(&mut self, w: Waiter, now: u64, cfg: &FleetConfig) {
        let Waiter { sid, arrival, .. } = w;
        if w.new_place {
            self.hdr.fresh.took(arrival, cfg.interval_ms);
            self.hdr.pending.n_asked += 1;
        }
        let (new, at) = match self.sight(sid, now, cfg.presence_ms / 2) {
            Sight::New(at) => (true, at),
            Sight::Recent(at) => (false, Some(at)),
        };
        let seen = at.and_then(|i| self.seen.get_mut(i));
        let entry = WaiterSighting {
            sid,
            arrival,
            at: now,
        };
        let h = &mut self.hdr.pending;
        if !record(
            seen,
            h.batch_seq,
            self.waiters,
            &mut h.n_waiters,
            new,
            entry,
            |e| e.sid == sid,
        ) {
            self.drop_report(sid);
        }
    }

    /// Whether `key` was sent within `every_ms` (then: where it is in the sent table), or not
    /// (then it is noted sent now). A full table evicts the oldest entry of the probed ones: a
    /// session is at worst sent twice.
    pub(super) fn sight(&mut self, key: u64, now: u64, every_ms: u64) -> Sight {
        let len = self.seen.len();
        if len == 0 {
            return Sight::New(None);
        }
        let h = (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize;
        let mut oldest = h % len;
        for i in 0..8 {
            let ix = (h + i) % len;
            let Some(e) = self.seen.get(ix).copied() else {
                break;
            };
            if e.sid == key {
                if now.saturating_sub(e.sent_ms) < every_ms {
                    return Sight::Recent(ix);
                }
                oldest = ix;
                break;
            }
            if e.sid == 0 || now.saturating_sub(e.sent_ms) >= every_ms {
                oldest = ix;
                break;
            }
            if self.seen.get(oldest).is_some_and(|o| e.sent_ms < o.sent_ms) {
                oldest = ix;
            }
        }
        match self.seen.get_mut(oldest) {
            Some(slot) => {
                *slot = Seen {
                    sid: key,
                    sent_ms: now,
                    batch: u32::MAX,
                    slot: 0,
                };
                Sight::New(Some(oldest))
            }
            None => Sight::New(None),
        }
    }

    /// A report that found its batch full: not noted as sent, so the next sighting tries again.
    fn drop_report(&mut self, key: u64) {
        self.hdr.metrics.dropped += 1;
        let len = self.seen.len();
        let h = (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize;
        for i in 0..8 {
            if let Some(e) = self.seen.get_mut((h + i) % len.max(1)) {
                if e.sid == key {
                    e.sid = 0;
                    return;
                }
            }
        }
    }

    pub(super) fn wait(&self, arrival: u64, sid: u64, now: u64, cfg: &FleetConfig) -> FleetVerdict {
        // A line too long to come whole is counted by arrival buckets, once counts came
        // (tally_zone.rs), while they count at least the line Redis keeps. That line only
        // loses waiters (when the reports fall behind, at a million); counts below it lost
        // something: a node's last counts, with its zone (a restart), leave the waiters it
        // had just moved to a new epoch counted nowhere until their next stamp (the
        // ten-minute rehearsal: 100 places too near the head for 6 s, 10 s after a node
        // restarted), or a fleet just upgraded from a build that did not count.
        let pic = &self.hdr.pic;
        let counts = match pic.samples_exact {
            0 => self.counts().filter(|c| c.total() >= pic.queue_len),
            _ => None,
        };
        // (The counts reckon nobody: what they count ahead was seen taken.)
        let (position, queue_len, seen) = match counts {
            Some(c) => {
                let told = c
                    .position(arrival)
                    .saturating_sub(self.moved_since(&c, now, cfg));
                let position = told.saturating_sub(pic.aged_ranks).max(1);
                (position, pic.queue_len.max(c.total()), position)
            }
            None => {
                let (position, seen) = self.sampled_position(arrival, sid, cfg);
                (position, pic.queue_len, seen)
            }
        };
        FleetVerdict::Wait {
            position,
            queue_len: queue_len.max(position),
            eta_secs: self.eta_secs(position, cfg),
            counted: if self.settled(arrival, cfg) {
                Counted::All
            } else {
                Counted::Estimate { seen }
            },
        }
    }

    /// Whether a waiter who took its place at `arrival` is told every place taken ahead of it
    /// that a picture can show: it took it before [`FleetNode::reported_to`]
    /// ([`FleetNode::unseen_ahead`] reckons none for it). Its position may still be too far
    /// back, by the let-ins since the nodes' reports.
    pub fn settled(&self, arrival: u64, cfg: &FleetConfig) -> bool {
        self.hdr.pic.window_ms != 0 && arrival <= self.reported_to(cfg)
    }

    /// The moment before which the picture holds every node's places: its window's tick when
    /// every node synced in that window before its answer came, else an interval earlier
    /// (every node reports each interval). The nodes tick together but sync one after
    /// another, a few milliseconds apart; the one that syncs first learns the others' places
    /// of the last interval only from its next picture (or its second look,
    /// [`FleetNode::look_again`]).
    pub(super) fn reported_to(&self, cfg: &FleetConfig) -> u64 {
        let pic = &self.hdr.pic;
        if pic.reported >= pic.nodes {
            pic.window_ms
        } else {
            pic.window_ms.saturating_sub(cfg.interval_ms)
        }
    }

    /// Whether to sync again soon, in the same window: the picture lacks some nodes' reports
    /// of its window (they sync a few milliseconds after this one), and waiters hear
    /// positions from it. Told from a picture that lacks them, the newcomers of the last
    /// interval are reckoned from a pace that lags a crowd's ramp, and a few were told
    /// places too near the head (issue 51: the 60-second rehearsal's pairs that grew were
    /// such answers). The driver bounds the looks per tick.
    pub fn look_again(&self, now: u64, cfg: &FleetConfig) -> bool {
        let pic = &self.hdr.pic;
        let waiting = pic.queue_len > 0 || !pic.shows_free_places(cfg);
        pic.window_ms != 0
            && pic.reported < pic.nodes
            && waiting
            && window_end(now, cfg.interval_ms) == pic.window_ms
    }

    /// The position the picture's line gives (whole, or its samples), less the ranks the
    /// fleet let in since while it aged: what a synced node told every waiter before the
    /// counts, and still tells while they do not answer. And of it, the places seen taken
    /// ahead (without the other nodes' newcomers reckoned, [`FleetNode::unseen_ahead`]).
    pub fn sampled_position(&self, arrival: u64, sid: u64, cfg: &FleetConfig) -> (u64, u64) {
        // Past the picture's line: behind it, and behind this node's newcomers before it.
        let behind = if arrival > self.tail() {
            self.hdr.fresh.ahead(arrival)
        } else {
            0
        };
        let seen = self.position_of(arrival, sid).saturating_add(behind);
        let told = seen.saturating_add(self.unseen_ahead(arrival, cfg));
        let aged = self.hdr.pic.aged_ranks;
        (
            told.saturating_sub(aged).max(1),
            seen.saturating_sub(aged).max(1),
        )
    }

    /// How far the line moved that the counts do not show: by the other nodes' let-ins since
    /// their last calls, which the counts still hold as waiting (as the counts' call reckoned
    /// them); by the places the picture expects the interval to let in, as the wait it tells is
    /// reckoned ([`FleetNode::eta_secs`]), for the part of the interval gone since the counts
    /// came; and by no more than those whose turn it is (the cursor's), who alone may take
    /// them. At most an interval's since the counts: a picture older than that is aged
    /// ([`FleetNode::age`]) by the ranks it let in.
    fn moved_since(&self, c: &CountsView, now: u64, cfg: &FleetConfig) -> u64 {
        let interval = u128::from(cfg.interval_ms.max(1));
        let gone = now.saturating_sub(c.at).min(cfg.interval_ms);
        let moved = u128::from(self.hdr.pic.per_interval(cfg)) * u128::from(gone) / interval;
        // Ten nodes that call in turn leave the counts short of four and a half intervals of
        // one node's let-ins on average: at the head of a crowd's wave, a few hundred places
        // (the simulator's p99 at 100,000 waiting: 23 % without them, 8 % with them).
        let moved = moved + u128::from(self.hdr.counts.unreported);
        let turn = match self.hdr.pic.cursor {
            u64::MAX => c.total(),
            cursor => c.position(cursor),
        };
        u64::try_from(moved).unwrap_or(u64::MAX).min(turn)
    }

    /// How long until `position` is let in: the line moves by the places free now, and those
    /// the sessions about to leave will free (unknown while nobody is about to leave).
    pub(super) fn eta_secs(&self, position: u64, cfg: &FleetConfig) -> Option<u64> {
        let per_interval = self.hdr.pic.per_interval(cfg);
        if per_interval == 0 {
            return None;
        }
        let ms = u128::from(position) * u128::from(cfg.interval_ms) / u128::from(per_interval);
        Some(u64::try_from(ms.div_ceil(1000)).unwrap_or(u64::MAX))
    }

    /// The arrival of the last waiter of the picture's line (0: it shows nobody).
    pub(super) fn tail(&self) -> u64 {
        let n = self.hdr.pic.samples_len as usize;
        n.checked_sub(1)
            .and_then(|i| self.samples.get(i))
            .map_or(0, |s| s.arrival)
    }

    /// The picture's samples of the line, by rank.
    pub(super) fn line(&self) -> &[Sample] {
        self.samples
            .get(..self.hdr.pic.samples_len as usize)
            .unwrap_or_default()
    }

    /// 1-based position of the waiter of session `sid` who arrived at `arrival`. In a line
    /// the picture holds whole: its session's rank, plus one (no two waiters alike), or where
    /// it would stand if the picture does not hold its session yet. In a longer one, as
    /// [`FleetNode::position`].
    pub fn position_of(&self, arrival: u64, sid: u64) -> u64 {
        if self.hdr.pic.samples_exact == 0 {
            return self.position(arrival);
        }
        let line = self.line();
        let at = line.partition_point(|s| s.before(arrival, sid));
        if line.get(at).is_some_and(|s| s.sid == sid) {
            return at as u64 + 1;
        }
        // The line holds the session at another arrival (`one_place_per=`: two tickets of one
        // user, each with the moment it took the user's place; the line keeps the later), or
        // not at all (a newcomer the picture cannot show yet): a scan of at most EXACT_LINE.
        match line.iter().position(|s| s.sid == sid) {
            Some(i) => i as u64 + 1,
            None => at as u64 + 1,
        }
    }

    /// 1-based position of a waiter who arrived at `arrival`: the fleet's waiters who arrived
    /// before it (interpolated between the picture's samples of the line), plus one.
    pub fn position(&self, arrival: u64) -> u64 {
        let samples = self.line();
        let first_after = samples.partition_point(|s| s.arrival < arrival);
        let Some(after) = samples.get(first_after) else {
            return self.hdr.pic.queue_len + 1;
        };
        let Some(before) = first_after.checked_sub(1).and_then(|i| samples.get(i)) else {
            return after.rank + 1;
        };
        let span = after.arrival.saturating_sub(before.arrival).max(1);
        let into = arrival.saturating_sub(before.arrival);
        let ranks = after.rank.saturating_sub(before.rank);
        before.rank + 1 + (u128::from(ranks) * u128::from(into) / u128::from(span)) as u64
    }

    /// The arrival of the waiter at 0-based `rank` in the picture's line (interpolated between
    /// its samples); None past the line's end.
    pub(super) fn arrival_at_rank(&self, rank: u64) -> Option<u64> {
        let samples = self.line();
        let i = samples.partition_point(|s| s.rank < rank);
        let after = samples.get(i)?;
        let Some(before) = i.checked_sub(1).and_then(|b| samples.get(b)) else {
            return Some(after.arrival);
        };
        let span = after.rank.saturating_sub(before.rank).max(1);
        let into = rank.saturating_sub(before.rank);
        let arrivals = after.arrival.saturating_sub(before.arrival);
        Some(before.arrival + (u128::from(arrivals) * u128::from(into) / u128::from(span)) as u64)
    }

    // ------------------------------------------------------------------ the sync
}
