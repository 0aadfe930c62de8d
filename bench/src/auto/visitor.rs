//! One visitor of `smart-limit-bench auto`: arrives, waits as told, and once admitted loads
//! the page and its assets (at once, one connection each) until its stay ends.

use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::args::Target;
use crate::cookies::Jar;
use crate::http::{Client, Meta, Response};
use crate::page::{self, Document, Navigation};

/// An answer the origin gave (not the room's waiting answer), as the visitor timed it.
#[derive(Debug, Clone, Copy)]
pub struct OriginAnswer {
    /// When it came (ms since the start).
    pub at: u64,
    pub ms: u64,
    pub status: u16,
}

/// What every visitor saw.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    /// When each complete page load ended (ms since the start).
    pub complete_at: Vec<u64>,
    pub broken: u64,
    pub waiting: u64,
    pub origin: Vec<OriginAnswer>,
}

pub struct Visitor {
    pub id: u64,
    pub target: Arc<Target>,
    pub page: String,
    pub assets: Vec<String>,
    pub marker: String,
    pub stay: Duration,
    pub think: Duration,
    pub timeout: Duration,
    pub start: Instant,
    pub end: Instant,
}

/// One request's outcome: the answer (None: no answer) and how long it took.
type Timed = (Option<(Response, Meta)>, u64);

impl Visitor {
    pub fn visit(self, tally: &Mutex<Tally>) {
        let mut page_client = Client::new(&self.target, None, self.timeout);
        let mut asset_clients: Vec<Client> = self
            .assets
            .iter()
            .map(|_| Client::new(&self.target, None, self.timeout))
            .collect();
        let jar = Mutex::new(Jar::default());
        let mut admitted: Option<Instant> = None;
        let mut nav = Navigation::Typed;
        while Instant::now() < self.end && admitted.is_none_or(|a| a.elapsed() < self.stay) {
            let headers = page::navigation_headers(nav);
            let (answer, ms) = get(
                &mut page_client,
                &jar,
                &self.page,
                page::NAV_ACCEPT,
                &headers,
            );
            let Some((r, meta)) = answer else {
                thread::sleep(Duration::from_secs(1));
                continue;
            };
            // A cookie check: back at once with the ticket.
            if (300..400).contains(&r.status) {
                continue;
            }
            let retry_after = meta.retry_after.is_some();
            match page::document(r.status, retry_after, &r.body, Some(&self.marker)) {
                Document::Waiting => {
                    self.count(tally, |t| t.waiting += 1);
                    nav = Navigation::Refresh;
                    let secs = meta
                        .retry_after
                        .and_then(|s| s.trim().parse::<u64>().ok())
                        .unwrap_or(1);
                    thread::sleep(Duration::from_secs(secs.clamp(1, 5)));
                    continue;
                }
                Document::Origin | Document::Error | Document::Cut => {}
            }
            // The origin answered (its page, or its own error).
            self.origin(tally, r.status, ms);
            if r.status != 200 {
                self.count(tally, |t| t.broken += 1);
                thread::sleep(self.think);
                continue;
            }
            admitted.get_or_insert_with(Instant::now);
            nav = Navigation::Click;
            let loads: Vec<Timed> = thread::scope(|s| {
                let handles: Vec<_> = asset_clients
                    .iter_mut()
                    .zip(&self.assets)
                    .map(|(c, path)| {
                        let jar = &jar;
                        s.spawn(move || {
                            let dest = page::Dest::of(path);
                            get(c, jar, path, dest.accept(), &dest.headers())
                        })
                    })
                    .collect();
                handles.into_iter().filter_map(|h| h.join().ok()).collect()
            });
            let mut whole = loads.len() == self.assets.len();
            for (answer, ms) in loads {
                match answer {
                    Some((r, m)) if m.retry_after.is_none() => {
                        self.origin(tally, r.status, ms);
                        whole &= r.status == 200;
                    }
                    _ => whole = false,
                }
            }
            let at = self.start.elapsed().as_millis() as u64;
            self.count(tally, |t| match whole {
                true => t.complete_at.push(at),
                false => t.broken += 1,
            });
            thread::sleep(self.think);
        }
        let _ = self.id;
    }

    fn origin(&self, tally: &Mutex<Tally>, status: u16, ms: u64) {
        let at = self.start.elapsed().as_millis() as u64;
        self.count(tally, |t| t.origin.push(OriginAnswer { at, ms, status }));
    }

    fn count(&self, tally: &Mutex<Tally>, f: impl FnOnce(&mut Tally)) {
        if let Ok(mut t) = tally.lock() {
            f(&mut t);
        }
    }
}

/// GET with the jar's cookies, keeping those the answer sets; timed.
fn get(
    c: &mut Client,
    jar: &Mutex<Jar>,
    path: &str,
    accept: &str,
    headers: &[(&str, &str)],
) -> Timed {
    let cookie = jar.lock().ok().and_then(|j| j.header());
    let t0 = Instant::now();
    let answer = c.get_meta(path, accept, cookie.as_deref(), headers).ok();
    let ms = t0.elapsed().as_millis() as u64;
    if let (Some((r, _)), Ok(mut j)) = (&answer, jar.lock()) {
        for sc in &r.set_cookies {
            j.store(sc);
        }
    }
    (answer, ms)
}
