//! The synced room's script and its Rust twin side by side (`Twin`): the same syncs and
//! draws at the same times must give the same pictures and grants. Shared by the fleet script
//! tests (fleet_script.rs and its siblings: fleet_sessions_script.rs, fleet_runs_script.rs,
//! fleet_flood_script.rs, fleet_challenge_script.rs, ...).

use std::collections::HashMap;

use smart_limit_core::fleet::{
    draw_reply, picture_reply, Ask, Fence, FleetConfig, FleetModel, FleetScript, Report,
    RoomPicture, Sighting, SyncAnswer, WaiterSighting,
};
use smart_limit_core::redis::resp::Value;
use smart_limit_core::redis::Form;
use smart_limit_core::room::gcra::Rate;

use super::Client;

pub const BASE: u64 = 1_800_000_000_000;

pub fn cfg(max_active: u64) -> FleetConfig {
    FleetConfig {
        interval_ms: 1000,
        max_active,
        active_window_ms: 10_000,
        presence_ms: 5_000,
        keep_ms: 5_000,
        max_line: 0,
    }
}

pub struct Twin {
    pub redis: Client,
    pub script: FleetScript,
    pub model: FleetModel,
    /// Each node's last sync sequence.
    pub seqs: HashMap<u64, u64>,
    pub max_active: u64,
}

pub fn fence(node_id: u64, seq: u64, now: u64) -> Fence {
    Fence {
        node_id,
        generation: 1,
        window: now / 1000 * 1000,
        seq,
    }
}

impl Twin {
    pub fn new(port: u16, room: &str, c: FleetConfig) -> Twin {
        let mut redis = Client::connect(port).unwrap();
        let script = FleetScript::new("test", room, c);
        let v = redis.cmd(&FleetScript::load_command());
        assert_eq!(v, Value::Bulk(script.sha.clone().into_bytes()));
        Twin {
            redis,
            script,
            model: FleetModel::new(c, BASE, 3_600_000),
            seqs: HashMap::new(),
            max_active: c.max_active,
        }
    }

    /// With flood control at `rate`, in the script and the model alike.
    pub fn flood(self, rate: Rate) -> Twin {
        Twin {
            script: self.script.with_flood(Some(rate)),
            model: self.model.with_flood(Some(rate)),
            ..self
        }
    }

    /// A sync with the fence given, by both; their answers must agree.
    pub fn sync_fenced(&mut self, f: Fence, now: u64, r: &Report) -> SyncAnswer {
        let v = self.redis.cmd(
            &self
                .script
                .sync(Form::Sha, f, (now, now), r, self.max_active),
        );
        let got = picture_reply(&v).unwrap_or_else(|e| panic!("{e}: {v:?}"));
        let want = self.model.sync(f, now, r);
        assert_eq!(got, want, "sync of node {} at {now}", f.node_id);
        got
    }

    pub fn sync(&mut self, node: u64, now: u64, r: &Report) -> RoomPicture {
        let seq = self.seqs.entry(node).or_insert(0);
        *seq += 1;
        let f = fence(node, *seq, now);
        match self.sync_fenced(f, now, r) {
            SyncAnswer::Picture(p) => p,
            SyncAnswer::Stale => panic!("a sync in order was taken for stale"),
        }
    }

    pub fn draw_fenced(&mut self, f: Fence, now: u64, ask: Ask) -> u64 {
        let v = self
            .redis
            .cmd(&self.script.draw(Form::Sha, f, now, ask, self.max_active));
        let got = draw_reply(&v).unwrap_or_else(|e| panic!("{e}: {v:?}"));
        assert_eq!(
            got,
            self.model.draw(f, now, ask),
            "draw of node {} at {now}",
            f.node_id
        );
        got.granted
    }

    pub fn draw(&mut self, node: u64, now: u64, want: u64) -> u64 {
        self.draw_for(node, now, want, 0)
    }

    /// A draw for clients the oldest of whom arrived at `oldest` (0: not known).
    pub fn draw_for(&mut self, node: u64, now: u64, want: u64, oldest: u64) -> u64 {
        let seq = self.seqs.get(&node).copied().unwrap_or(0);
        self.draw_fenced(fence(node, seq, now), now, Ask { want, oldest })
    }
}

/// Waiters (sid, arrival ms after BASE), seen as the report is sent.
pub fn waiters(list: &[(u64, u64)]) -> Report {
    Report {
        polls: list.len() as u64,
        waiters: list.iter().map(|&(s, a)| waiter(s, a, u64::MAX)).collect(),
        ..Report::default()
    }
}

pub fn waiter(sid: u64, arrival: u64, at: u64) -> WaiterSighting {
    WaiterSighting {
        sid,
        arrival: BASE + arrival,
        at,
    }
}

pub fn sighting(sid: u64, at: u64) -> Sighting {
    Sighting { sid, at }
}
