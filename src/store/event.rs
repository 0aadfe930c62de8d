//! A room's scheduled events as its requests see them: those of `smart_limit_event` (read in
//! `conf::event`) and those made at run time through the control endpoint
//! (`event::runtime`), which the room's shared memory keeps as a table every worker reads.
//! On a Redis store the fleet's table is in Redis: a change is written there first, and each
//! node copies the fleet's table into its memory at most [`FETCH_MS`] apart.

use core::cell::{Cell, RefCell};
use core::ops::Range;
use std::rc::Rc;

use ngx::ffi::NGX_LOG_ERR;
use ngx::ngx_log_error;
use smart_limit_core::event::runtime::{
    apply, merge, read_table, write_table, Change, Source, MAX_ENTRIES,
};
use smart_limit_core::event::{EventError, EventSpec, Phase};
use smart_limit_core::page::{check_template, Template};
use smart_limit_core::redis::{get_reply, put_reply, EventsKey, FleetTable, Put};
use smart_limit_core::room::{flood_hash, EventNow};

use super::{Answer, StoreError, Zone};
use crate::clock::now_ms;
use crate::redis::Client;

/// How often a worker looks whether the room's table changed (one look under the zone's lock).
const CHECK_MS: u64 = 100;
/// How often a node copies the fleet's table from Redis (a Redis store).
pub const FETCH_MS: u64 = 1000;
/// Tries of a change that another node's change got ahead of.
const PUT_TRIES: usize = 3;

/// One event of a room, as the room's requests see it.
pub struct ZoneEvent {
    pub spec: EventSpec,
    /// Names this event's pre-queue in the room's memory (its name and start).
    pub id: u64,
    pub source: Source,
    /// `page=`: the waiting page while the event is in force.
    pub page: Option<Rc<Template>>,
}

impl ZoneEvent {
    pub fn new(spec: EventSpec, source: Source, page: Option<Rc<Template>>) -> ZoneEvent {
        // The room's key hash (never 0) over the name, seeded by the start: a new start is a
        // new pre-queue.
        let id = flood_hash(spec.start, spec.name.as_bytes());
        ZoneEvent {
            id,
            spec,
            source,
            page,
        }
    }

    /// A synced room's lottery moments (ms): the pre-queue, with `shuffle=on` (see
    /// `fleet::lottery_arrival`).
    pub fn lottery_ms(&self) -> Option<Range<u64>> {
        let s = &self.spec;
        (s.shuffle && s.prequeue < s.start)
            .then(|| s.prequeue.saturating_mul(1000)..s.start.saturating_mul(1000))
    }

    /// What the room needs to know for a decision at `now_ms` (wall clock), if the event is
    /// in its pre-queue or running.
    pub fn now(&self, now_ms: u64) -> Option<EventNow> {
        let started = match self.spec.phase(now_ms / 1000) {
            Phase::Prequeue => false,
            Phase::Running => true,
            Phase::Before | Phase::Over => return None,
        };
        Some(EventNow {
            id: self.id,
            started,
            shuffle: self.spec.shuffle,
        })
    }
}

/// Why an event's page (`page=`) was refused.
#[derive(Debug, thiserror::Error)]
pub enum PageError {
    #[error("cannot read \"{path}\": {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("\"{path}\": {source}")]
    Template {
        path: String,
        source: smart_limit_core::config::ParseError,
    },
}

/// Reads and checks an event's page (`page=`): a template file.
pub fn read_page(path: &str) -> Result<Template, PageError> {
    let text = std::fs::read_to_string(path).map_err(|source| PageError::Read {
        path: path.to_string(),
        source,
    })?;
    check_template(&text).map_err(|source| PageError::Template {
        path: path.to_string(),
        source,
    })?;
    Ok(Template::compile(&text))
}

/// The room's events: the configured ones, and per worker the room's list now.
#[derive(Default)]
pub struct ZoneEvents {
    /// `smart_limit_event`s of the room, each with its page (read with the configuration).
    configured: Vec<(EventSpec, Option<Rc<Template>>)>,
    /// Per worker: the room's events (configured ones not cancelled, then those made at run
    /// time), as of table generation `seen`.
    current: RefCell<Rc<[Rc<ZoneEvent>]>>,
    seen: Cell<u64>,
    checked_at: Cell<u64>,
    /// Per worker: when this worker last asked whether the node's copy of the fleet's table
    /// is due.
    fetch_checked_at: Cell<u64>,
    /// A Redis store: the fleet's table in Redis.
    key: Option<EventsKey>,
}

impl ZoneEvents {
    /// `key`: a Redis store's table in Redis.
    pub fn new(
        configured: Vec<(EventSpec, Option<Rc<Template>>)>,
        key: Option<EventsKey>,
    ) -> ZoneEvents {
        let current: Vec<Rc<ZoneEvent>> = configured
            .iter()
            .map(|(s, page)| Rc::new(ZoneEvent::new(s.clone(), Source::Config, page.clone())))
            .collect();
        ZoneEvents {
            configured,
            current: RefCell::new(current.into()),
            key,
            ..ZoneEvents::default()
        }
    }

    fn specs(&self) -> Vec<EventSpec> {
        self.configured.iter().map(|(s, _)| s.clone()).collect()
    }
}

/// Why the control endpoint's change of events did not happen.
#[derive(Debug, thiserror::Error)]
pub enum EventsError {
    #[error("{0}")]
    Refused(#[from] EventError),
    #[error("{0}")]
    Store(#[from] StoreError),
}

impl Zone {
    /// The room's events as this worker last read them (see [`Zone::refresh_events`]).
    pub fn events(&self) -> Rc<[Rc<ZoneEvent>]> {
        match self.events.current.try_borrow() {
            Ok(list) => list.clone(),
            Err(_) => Rc::from(Vec::new()),
        }
    }

    /// Reads the room's table of events made at run time again if it changed (looked at
    /// under the zone's lock, at most [`CHECK_MS`] apart per worker). Called where a request
    /// meets the room, never under the zone's lock (it takes it).
    pub fn refresh_events(&self, now: u64) {
        let ev = &self.events;
        let last = ev.checked_at.get();
        if now.saturating_sub(last) < CHECK_MS && last <= now {
            return;
        }
        ev.checked_at.set(now);
        let changed = self.shm.with_room(|room| {
            let g = room.events_generation();
            (g != ev.seen.get()).then(|| (g, room.events_table().0.to_string()))
        });
        if let Ok(Some((g, text))) = changed {
            self.load_events(g, &text);
        }
    }

    /// Makes the worker's list from the configured events and the table's text.
    fn load_events(&self, generation: u64, text: &str) {
        let (entries, bad) = read_table(text);
        for e in bad {
            self.events_problem(&format!("an event made at run time cannot be read: {e}"));
        }
        let specs = self.events.specs();
        let list: Vec<Rc<ZoneEvent>> = merge(&specs, &entries)
            .into_iter()
            .map(|(spec, source)| {
                let page = match source {
                    Source::Config => self
                        .events
                        .configured
                        .iter()
                        .find(|(s, _)| s.name == spec.name)
                        .and_then(|(_, p)| p.clone()),
                    Source::Control => spec.page.as_deref().and_then(|path| {
                        read_page(path)
                            .map_err(|e| {
                                let what = format!("event \"{}\": page= {e}", spec.name);
                                self.events_problem(&what)
                            })
                            .ok()
                            .map(Rc::new)
                    }),
                };
                Rc::new(ZoneEvent::new(spec.clone(), source, page))
            })
            .collect();
        if let Ok(mut current) = self.events.current.try_borrow_mut() {
            *current = list.into();
            self.events.seen.set(generation);
        }
    }

    fn events_problem(&self, what: &str) {
        ngx_log_error!(
            NGX_LOG_ERR,
            crate::log::cycle_log(),
            "smart_limit zone \"{}\": {}",
            self.params.name,
            what
        );
    }

    /// The connection of a Redis store.
    fn store_client(&self) -> Option<&Client> {
        match &self.store {
            super::Store::Central(rs) => Some(rs.client()),
            super::Store::Synced(fs) => fs.client(),
            super::Store::Shm => None,
        }
    }

    /// A Redis store: the node copies the fleet's table from Redis when due (once per
    /// [`FETCH_MS`] for the node, whichever worker is first), without waiting for it.
    pub fn keep_events_fresh(&'static self, now: u64) {
        let (Some(key), Some(client)) = (&self.events.key, self.store_client()) else {
            return;
        };
        let last = self.events.fetch_checked_at.get();
        if now.saturating_sub(last) < FETCH_MS && last <= now {
            return;
        }
        self.events.fetch_checked_at.set(now);
        let due = self
            .shm
            .with_room(|room| room.claim_events_fetch(now, FETCH_MS));
        if !matches!(due, Ok(true)) || !client.available(now) {
            return;
        }
        let cmd = key.get();
        ngx::async_::spawn(async move {
            match client.request(cmd).await.map(|v| get_reply(&v)) {
                Ok(Ok(table)) => {
                    client.reply_was_good();
                    self.copy_fleet_table(&table);
                }
                Ok(Err(e)) => client.reply_was_bad(&e.to_string()),
                // The client has logged the failure burst.
                Err(_) => {}
            }
        })
        .detach();
    }

    /// Copies the fleet's table into this node's memory (never an older one over a newer).
    fn copy_fleet_table(&self, table: &FleetTable) {
        let _ = self.shm.with_room(|room| {
            if table.version >= room.events_table().1 {
                if let Err(e) = room.set_events_table(&table.text, Some(table.version)) {
                    self.events_problem(&e.to_string());
                }
            }
        });
    }

    /// The control endpoint creates or cancels an event: checked against the room's events
    /// as `nginx -t` checks a configuration, then written to the room's table (a Redis store:
    /// the fleet's, then this node's copy).
    pub fn change_events(
        &'static self,
        change: Change,
        now: u64,
    ) -> Answer<Result<(), EventsError>> {
        let specs = self.events.specs();
        let secs = now / 1000;
        let (Some(key), Some(client)) = (&self.events.key, self.store_client()) else {
            let result = self.shm.with_room(|room| {
                let (entries, _) = read_table(room.events_table().0);
                let next = apply(&specs, &entries, change, secs)?;
                room.set_events_table(&write_table(&next), None)
                    .map_err(|_| EventError::TableFull(MAX_ENTRIES))?;
                Ok::<(), EventError>(())
            });
            self.events.checked_at.set(0);
            self.refresh_events(now);
            return Answer::Now(match result {
                Ok(r) => r.map_err(EventsError::from),
                Err(e) => Err(e.into()),
            });
        };
        if !client.available(now) {
            let e = StoreError::Redis(format!("{} is not answering", client.label()));
            return Answer::Now(Err(e.into()));
        }
        // Start from this node's copy; a stale copy is refused and answered with the fleet's.
        let mine = self.shm.with_room(|room| {
            let (text, version) = room.events_table();
            FleetTable {
                version,
                text: text.to_string(),
            }
        });
        Answer::Later(Box::pin(async move {
            let mut table = mine?;
            for _ in 0..PUT_TRIES {
                let (entries, _) = read_table(&table.text);
                let next = write_table(&apply(&specs, &entries, change.clone(), secs)?);
                let reply = client
                    .eval(|form| key.put(form, table.version, &next))
                    .await
                    .map_err(|e| StoreError::Redis(e.to_string()))?;
                match put_reply(&reply).map_err(|e| StoreError::Redis(e.to_string()))? {
                    Put::Written(written) => {
                        self.copy_fleet_table(&written);
                        self.events.checked_at.set(0);
                        self.refresh_events(now_ms());
                        return Ok(());
                    }
                    Put::Stale(now_there) => {
                        self.copy_fleet_table(&now_there);
                        table = now_there;
                    }
                }
            }
            let e = "the fleet's events kept changing; try again".to_string();
            Err(StoreError::Redis(e).into())
        }))
    }
}
