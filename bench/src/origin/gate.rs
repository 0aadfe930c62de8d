//! The model origin's capacity: at most `capacity` requests in service at once, the next
//! `queue` waiting for a slot in arrival order, the rest refused at once (503), as an
//! application server with a worker pool and a bounded accept queue behaves. The capacity can
//! change while requests are in service (a deploy that halves it): a lower one admits nobody
//! until enough have left, and evicts nobody.

use std::sync::{Condvar, Mutex, MutexGuard};

/// What a request got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    /// In service now (after waiting, if it queued); [`Gate::leave`] when done.
    Served,
    /// Over the queue: refused at once.
    Refused,
}

#[derive(Debug, Default)]
struct State {
    capacity: u64,
    queue: u64,
    in_service: u64,
    /// Tickets: the next one to hand out, and the next one to serve (arrival order).
    next_ticket: u64,
    serving: u64,
    /// Figures since the start.
    served: u64,
    refused: u64,
    most_in_service: u64,
}

/// Figures since the start, and the gate as it stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Figures {
    pub capacity: u64,
    pub queue: u64,
    pub in_service: u64,
    pub waiting: u64,
    pub served: u64,
    pub refused: u64,
    pub most_in_service: u64,
}

pub struct Gate {
    state: Mutex<State>,
    freed: Condvar,
}

impl Gate {
    pub fn new(capacity: u64, queue: u64) -> Gate {
        Gate {
            state: Mutex::new(State {
                capacity,
                queue,
                ..State::default()
            }),
            freed: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A poisoned lock only means a request thread panicked: the counts are still whole.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A request arrives: served at once if a slot is free and nobody waits, queued (this call
    /// blocks until its turn) if the queue has room, else refused.
    pub fn enter(&self) -> Entry {
        let mut s = self.lock();
        let waiting = s.next_ticket - s.serving;
        if waiting == 0 && s.in_service < s.capacity {
            s.in_service += 1;
            s.served += 1;
            s.most_in_service = s.most_in_service.max(s.in_service);
            return Entry::Served;
        }
        if waiting >= s.queue {
            s.refused += 1;
            return Entry::Refused;
        }
        let ticket = s.next_ticket;
        s.next_ticket += 1;
        while !(s.serving == ticket && s.in_service < s.capacity) {
            s = self.freed.wait(s).unwrap_or_else(|e| e.into_inner());
        }
        s.serving += 1;
        s.in_service += 1;
        s.served += 1;
        s.most_in_service = s.most_in_service.max(s.in_service);
        // The next in line may be served too, if slots remain.
        self.freed.notify_all();
        Entry::Served
    }

    /// A served request is done: its slot frees.
    pub fn leave(&self) {
        let mut s = self.lock();
        s.in_service = s.in_service.saturating_sub(1);
        drop(s);
        self.freed.notify_all();
    }

    /// The capacity from now on (at least 1).
    pub fn set_capacity(&self, capacity: u64) {
        self.lock().capacity = capacity.max(1);
        self.freed.notify_all();
    }

    pub fn figures(&self) -> Figures {
        let s = self.lock();
        Figures {
            capacity: s.capacity,
            queue: s.queue,
            in_service: s.in_service,
            waiting: s.next_ticket - s.serving,
            served: s.served,
            refused: s.refused,
            most_in_service: s.most_in_service,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::thread;

    /// Waits until the gate shows `waiting` queued requests (threads blocked in `enter`).
    fn until_waiting(g: &Gate, waiting: u64) {
        while g.figures().waiting < waiting {
            thread::yield_now();
        }
    }

    #[test]
    fn serves_capacity_queues_the_next_refuses_the_rest() {
        let g = Arc::new(Gate::new(2, 2));
        assert_eq!(g.enter(), Entry::Served);
        assert_eq!(g.enter(), Entry::Served);
        let queued: Vec<_> = (0..2)
            .map(|_| {
                let g = g.clone();
                thread::spawn(move || g.enter())
            })
            .collect();
        until_waiting(&g, 2);
        assert_eq!(g.enter(), Entry::Refused);
        // Two leave: both queued are served, never more than two at once.
        g.leave();
        g.leave();
        for q in queued {
            assert_eq!(q.join().unwrap(), Entry::Served);
        }
        let f = g.figures();
        assert_eq!(
            (
                f.in_service,
                f.waiting,
                f.served,
                f.refused,
                f.most_in_service
            ),
            (2, 0, 4, 1, 2)
        );
    }

    #[test]
    fn queued_requests_go_in_arrival_order() {
        let g = Arc::new(Gate::new(1, 8));
        assert_eq!(g.enter(), Entry::Served);
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut threads = Vec::new();
        for i in 0..5u64 {
            let (gt, order) = (g.clone(), order.clone());
            threads.push(thread::spawn(move || {
                assert_eq!(gt.enter(), Entry::Served);
                order.lock().unwrap().push(i);
                gt.leave();
            }));
            // Each queues before the next arrives.
            until_waiting(&g, i + 1);
        }
        g.leave();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3, 4]);
    }

    #[test]
    fn a_lower_capacity_admits_nobody_until_enough_leave() {
        let g = Arc::new(Gate::new(4, 4));
        for _ in 0..4 {
            assert_eq!(g.enter(), Entry::Served);
        }
        g.set_capacity(2);
        let queued = {
            let g = g.clone();
            thread::spawn(move || g.enter())
        };
        until_waiting(&g, 1);
        // Two leave: still two in service, at the new capacity; the queued one waits.
        g.leave();
        g.leave();
        assert_eq!(g.figures().waiting, 1);
        g.leave();
        assert_eq!(queued.join().unwrap(), Entry::Served);
        assert_eq!(g.figures().in_service, 2);
    }
}
