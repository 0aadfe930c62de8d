//! Suspending a request on a store call that answers later, without blocking the worker.
//!
//! The future runs as a task on nginx's event loop (`ngx::async_`). When it resolves, its
//! output is put where the request will find it and the connection's write event is posted,
//! so nginx runs the request's handler again, which takes the output from the request's
//! context ([`crate::ctx`]). The context lives in the request pool: a request that ends early
//! drops it, and with it the task, which cancels the call.

use core::cell::Cell;
use core::future::Future;
use core::pin::Pin;
use std::rc::Rc;

use ngx::async_::Task;
use ngx::ffi::{ngx_post_event, ngx_posted_events};
use ngx::http::Request;

/// A call in flight for one request, and where its answer will be.
pub struct InFlight<T> {
    answer: Rc<Cell<Option<T>>>,
    _task: Task<()>,
}

impl<T> InFlight<T> {
    /// The answer, once it has come (taken: a second call gives None).
    pub fn take(&self) -> Option<T> {
        self.answer.take()
    }
}

/// Starts `future` for request `r`; its completion wakes the request. The result must be
/// kept in that request's context (so it is dropped, and the task cancelled, with the
/// request).
pub fn start<T: 'static>(r: &Request, future: Pin<Box<dyn Future<Output = T>>>) -> InFlight<T> {
    let answer = Rc::new(Cell::new(None));
    let slot = answer.clone();
    let c = r.connection();
    let task = ngx::async_::spawn(async move {
        slot.set(Some(future.await));
        // SAFETY: the task is dropped (cancelled) with the request's pool, before the request
        // and its connection go, so `c` is live whenever this runs; single-threaded.
        unsafe { ngx_post_event((*c).write, &raw mut ngx_posted_events) };
    });
    InFlight {
        answer,
        _task: task,
    }
}
