//! The newcomers of a synced room that no picture shows yet ([S27]: a position that only
//! goes down): the other nodes' places taken since the picture's reports, reckoned at the
//! fleet's pace or at this node's own, so that the next picture, which shows them, moves a
//! newcomer forward rather than back.

use super::{FleetConfig, FleetNode};

/// How many times its own count a node that started within the reckoned span counts at most
/// ([`FleetNode::over_the_span`]).
const RESTART_SCALE: u64 = 4;

/// `n` and a half more: the fleet's newcomers as a node's own few reckon them, erring high
/// (a position told too far back only falls; a quarter more still told some 3 to 5 places
/// too near the head, [`FleetNode::own_pace_ahead`]).
fn and_a_half(n: u64) -> u64 {
    n.saturating_add(n / 2)
}

impl<'m> FleetNode<'m> {
    /// Newcomers of other nodes who took their places before `arrival` and whom no picture
    /// showed yet ([S27]: a position that only goes down). The picture knows every place
    /// taken before [`FleetNode::reported_to`] (its tick, or an interval earlier); of the
    /// places taken since (up to `arrival`), it knows some, and this node its own (`fresh`,
    /// counted apart). The rest are reckoned at the fleet's pace (`newcomers` an interval) or
    /// at this node's own ([`FleetNode::own_pace_ahead`]), whichever is more: told so many
    /// more now, a client learns of fewer later, and its position falls rather than grows.
    /// (This node's own newcomers are in the paces too: the estimate errs high.)
    ///
    /// A pace is a mean, and a count of arrivals over a span strays from its mean by about
    /// its square root: the unseen are told with twice that more. Told the mean alone, a
    /// burst of 5 newcomers in 25 ms just after a tick moved one of them back by 3 (the
    /// clean-clone CI rehearsal of `cb6e744`), and a node restarted with no pace of its own
    /// moved one back by 7 (seed 7); with the margin, 34 of 36 60-second rehearsals moved
    /// nobody back past max(2, 1 %) (and with [`FleetNode::over_the_span`], 12 of 12), for a
    /// told-minus-true p99 of +64 to +86 (was +53 to +68).
    pub(super) fn unseen_ahead(&self, arrival: u64, cfg: &FleetConfig) -> u64 {
        let pic = &self.hdr.pic;
        let interval = cfg.interval_ms.max(1);
        let from = self.reported_to(cfg);
        if pic.window_ms == 0 || pic.nodes <= 1 || arrival <= from {
            return 0;
        }
        let span = (arrival - from).min(2 * interval);
        let expected = u128::from(pic.newcomers) * u128::from(span) / u128::from(interval);
        let expected = u64::try_from(expected).unwrap_or(u64::MAX);
        let known = self.shown_between(from, arrival);
        let unseen = expected
            .max(self.own_pace_ahead(from, arrival, cfg))
            .saturating_sub(known);
        unseen
            .saturating_add(unseen.isqrt().saturating_mul(2))
            .max(self.filling_ahead(arrival, cfg))
    }

    /// The fleet's newcomers since the picture's tick, up to `arrival`, that the free places
    /// did not take, less this node's own (counted apart): the fleet's places taken since,
    /// reckoned from this node's own (those let in at once too, this newcomer included, as in
    /// [`FleetNode::own_pace_ahead`] while places are free; [`FleetNode::fleet_of_own`]) and
    /// a half more, less the places the picture gave the
    /// interval. This answers a crowd that fills the room: the nodes' shares run out at
    /// different moments, and a node whose share lasted longest, reckoning the fleet's
    /// waiters from its own few, told its first ones places near the head while the others
    /// had a line already (the 60-second rehearsal: told 12 for a true 39, 0.5 s in).
    pub(super) fn filling_ahead(&self, arrival: u64, cfg: &FleetConfig) -> u64 {
        let (pic, fresh) = (&self.hdr.pic, &self.hdr.fresh);
        let since = pic.window_ms;
        // Only while the picture shows the room filling: once full, newcomers wait and the
        // line's pace tells them; reckoned by all the nodes, a node taking 60 % of them told
        // 384 for a true 170 (`t/270` TEST 7).
        if since == 0 || arrival <= since || !pic.shows_free_places(cfg) {
            return 0;
        }
        let fleet = self.fleet_of_own(fresh.arrived_between(since, arrival.saturating_add(1)));
        and_a_half(fleet)
            .saturating_sub(pic.per_interval(cfg))
            .saturating_sub(fresh.unshown_between(since, arrival))
    }

    /// The fleet's count of what this node counted `here` of: over this node's part of the
    /// fleet's newcomers (taken when the picture came,
    /// [`FleetNode::newcomers_of_last_interval`]; one of the nodes while the picture showed
    /// too few to tell), clamped to between one of the nodes and all of them.
    pub(super) fn fleet_of_own(&self, here: u64) -> u64 {
        let pic = &self.hdr.pic;
        let here = u128::from(here);
        let nodes = u128::from(pic.nodes.max(1));
        let fleet = match (pic.part_mine, pic.part_shown) {
            (1.., 1..) => {
                let (mine, shown) = (u128::from(pic.part_mine), u128::from(pic.part_shown));
                (here * shown / mine).clamp(here, here * nodes)
            }
            _ => here * nodes,
        };
        u64::try_from(fleet).unwrap_or(u64::MAX)
    }

    /// The fleet's newcomers from `from` to `arrival` as this node's own let it reckon them:
    /// those that took their places here and still wait, as many of the fleet's
    /// ([`FleetNode::fleet_of_own`]), and a half more, as the line's pace; less this node's
    /// own the picture does not show, which the position counts apart. This answers a
    /// crowd's first two intervals, when the picture shows no pace at all: told the line's
    /// pace of nobody, the crowd's first newcomers were told positions far too near the head
    /// and moved back by as many as the other nodes had taken when the next picture came (up
    /// to 157 places in the 60-second rehearsal). A half more, not a quarter: a node sees a
    /// third of a crowd's first milliseconds (2 to 4 newcomers in 55 ms on each of three
    /// nodes, seed 5), and a quarter more still told some 3 to 5 places too near the head.
    ///
    /// While the picture shows free places, this newcomer counts too: it waits because this
    /// node's share of them ran out, and the other nodes', taking as many newcomers, ran out
    /// about as soon; counted as none, each node's first waiter of a crowd was told 1 with up
    /// to 5 waiting ahead on the others (the 60-second rehearsal, 5 ms in). In a full room a
    /// lone newcomer is no sign of others: counted, it was told a line of 4 as 8.
    pub(super) fn own_pace_ahead(&self, from: u64, arrival: u64, cfg: &FleetConfig) -> u64 {
        let fresh = &self.hdr.fresh;
        let free = self.hdr.pic.shows_free_places(cfg);
        let to = arrival.saturating_add(u64::from(free));
        let here = self.over_the_span(fresh.recent_between(from, to), from, arrival);
        and_a_half(self.fleet_of_own(here)).saturating_sub(fresh.unshown_between(from, arrival))
    }

    /// `here`, this node's own newcomers from `from` to `arrival`, as many over the whole
    /// span: a node that started since `from` (a restart) counted them over the part it was
    /// up only. At most [`RESTART_SCALE`] times as many: a count of a few dozen milliseconds
    /// says little. Counted over its part alone, a node restarted 0.4 s before told its
    /// newcomers 8 to 15 places too near the head, the other nodes' places since its picture
    /// reckoned at the pace of the interval it was down (the 60-second rehearsal, seed 34).
    fn over_the_span(&self, here: u64, from: u64, arrival: u64) -> u64 {
        let started = self.hdr.sync.started_ms;
        if started <= from || arrival <= started {
            return here;
        }
        let (span, up) = (u128::from(arrival - from), u128::from(arrival - started));
        let over = u64::try_from(u128::from(here) * span / up).unwrap_or(u64::MAX);
        over.min(here.saturating_mul(RESTART_SCALE))
    }

    /// The waiters of a whole line (the picture holds every one) who took their places in
    /// `from..to`; 0 when the line came in samples.
    pub(super) fn shown_between(&self, from: u64, to: u64) -> u64 {
        if self.hdr.pic.samples_exact != 1 {
            return 0;
        }
        let line = self.line();
        let at = |t: u64| line.partition_point(|s| s.arrival < t);
        at(to).saturating_sub(at(from)) as u64
    }
}
