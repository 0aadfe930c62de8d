//! Suspending a request on a store call that answers later, without blocking the worker.
//!
//! The future runs as a task on nginx's event loop (`ngx::async_`). When it resolves, its
//! output is put where the request will find it and the connection's write event is posted,
//! so nginx runs the request's handler again, which takes the output from its module context.
//! The context lives in the request pool: a request that ends early drops it, and with it the
//! task, which cancels the call.

use core::cell::Cell;
use core::future::Future;
use core::pin::Pin;
use std::rc::Rc;

use ngx::async_::Task;
use ngx::core::Pool;
use ngx::ffi::{ngx_http_request_t, ngx_post_event, ngx_posted_events};
use ngx::http::HttpModule;

use crate::Module;

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

/// Starts `future` for request `r`; its completion wakes the request.
///
/// # Safety
/// `r` must be a live request; the returned value must be kept in that request's pool.
pub unsafe fn start<T: 'static>(
    r: *mut ngx_http_request_t,
    future: Pin<Box<dyn Future<Output = T>>>,
) -> InFlight<T> {
    let answer = Rc::new(Cell::new(None));
    let slot = answer.clone();
    let c = (*r).connection;
    let task = ngx::async_::spawn(async move {
        slot.set(Some(future.await));
        // SAFETY: the task is cancelled (dropped with the request's pool) before the
        // request and its connection go.
        unsafe { ngx_post_event((*c).write, &raw mut ngx_posted_events) };
    });
    InFlight {
        answer,
        _task: task,
    }
}

/// Keeps `state` (holding an [`InFlight`]) in the request's pool as this module's context.
/// Returns false when the pool is out of memory.
///
/// # Safety
/// `r` must be a live request; the module context must only ever hold an `S`.
pub unsafe fn keep<S>(r: *mut ngx_http_request_t, state: S) -> bool {
    let p = Pool::from_ngx_pool((*r).pool).allocate(state);
    if p.is_null() {
        return false;
    }
    (*r).ctx.add(Module::module().ctx_index).write(p.cast());
    true
}

/// The state [`keep`] stored for this request, if any.
///
/// # Safety
/// The module context must only ever hold an `S`.
pub unsafe fn kept<'a, S>(r: *mut ngx_http_request_t) -> Option<&'a mut S> {
    let p = *(*r).ctx.add(Module::module().ctx_index) as *mut S;
    p.as_mut()
}
