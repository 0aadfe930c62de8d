//! Unit tests of the synced room: the node's rules, reports, pictures and replies.

use super::*;
use crate::redis::resp::Value;

mod counts;
mod decide;
mod drawn;
mod first;
mod held;
mod lottery;
mod next;
mod positions;
mod replies;
mod reported;
mod reports;
mod unseen;
mod whole;

fn cfg() -> FleetConfig {
    FleetConfig {
        interval_ms: 1000,
        max_active: 10,
        active_window_ms: 60_000,
        presence_ms: 20_000,
        keep_ms: 20_000,
        max_line: 0,
    }
}

/// Its turn, no place yet: told its (unsettled) position, which saw `seen` taken ahead, and
/// to come back in a moment.
fn come_back(position: u64, queue_len: u64, seen: u64) -> FleetVerdict {
    FleetVerdict::Wait {
        position,
        queue_len,
        eta_secs: Some(0),
        counted: Counted::Estimate { seen },
    }
}

/// Whether the node told the client to wait (whatever the position).
fn waits(v: FleetVerdict) -> bool {
    matches!(v, FleetVerdict::Wait { .. })
}

/// A waiter holding its place since `arrival`.
fn w(sid: u64, arrival: u64) -> Waiter {
    Waiter {
        sid,
        arrival,
        new_place: false,
    }
}

/// The node's next picture (the answer to its last sync).
fn show(n: &mut FleetNode, p: &RoomPicture, now: u64) {
    assert!(n.apply(p, n.seq(), now, &cfg()));
}

/// A draw's answer after the node's last sync.
fn got(granted: u64) -> Option<Drawn> {
    Some(Drawn { granted, seq: 0 })
}

/// Samples of a line of `n` who arrived 100 ms apart from 100 on, rank by rank.
fn line_of(n: u64) -> Vec<Sample> {
    (0..n)
        .map(|rank| Sample {
            rank,
            arrival: 100 * (rank + 1),
            sid: 0,
        })
        .collect()
}

struct Mem(Vec<u64>);
impl Mem {
    fn bytes(&mut self) -> &mut [u8] {
        let len = self.0.len() * 8;
        // SAFETY: a Vec<u64> is 8-aligned and `len` bytes long.
        unsafe { core::slice::from_raw_parts_mut(self.0.as_mut_ptr() as *mut u8, len) }
    }
}

/// A node up since the start (its first sync at 1 ms): it knows its own newcomers over any
/// span a test reckons (a restarted node's are `unseen::a_restarted_node_...`).
fn node(mem: &mut Mem) -> FleetNode<'_> {
    let n = FleetNode::format(mem.bytes(), 7).unwrap();
    n.hdr.sync.started_ms = 1;
    n
}

/// A sampled line of 1,000 (too long to come whole): 100 before 2,000 ms, the rest by 11,000.
fn sampled() -> RoomPicture {
    let at = |rank, arrival| Sample {
        rank,
        arrival,
        sid: 0,
    };
    RoomPicture {
        queue_len: 1000,
        cursor: 0,
        nodes: 1,
        window_ms: 1000,
        samples: vec![at(0, 1_000), at(100, 2_000), at(999, 11_000)],
        ..RoomPicture::default()
    }
}
