//! The one source of random bytes: the operating system (`getrandom`), read in blocks.
//!
//! Ticket nonces and session ids are needed on the hot path (a new arrival needs 20 bytes);
//! one `getrandom` system call each would cost more than the rest of the decision. So bytes
//! are fetched a block at a time into a per-process buffer and handed out once each. The
//! bytes are exactly what the kernel gave, so nonces stay unpredictable and unique.
//!
//! After `fork` a child holds a copy of its parent's buffer: two nginx workers would hand out
//! the same nonces. A `pthread_atfork` child handler, registered on first use, empties the
//! buffer in every child, and the module also calls [`after_fork`] from its `init_process`
//! hook; either alone keeps bytes from being repeated across processes.

use std::cell::RefCell;

/// Bytes fetched per system call.
const BLOCK: usize = 4096;

/// Why no random bytes could be had.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the operating system's random source failed: {0}")]
pub struct RandomError(pub getrandom::Error);

struct Buffer {
    bytes: Box<[u8; BLOCK]>,
    /// Next unused byte; `BLOCK` = empty.
    next: usize,
}

thread_local! {
    static BUFFER: RefCell<Buffer> = RefCell::new(Buffer {
        bytes: Box::new([0; BLOCK]),
        next: BLOCK,
    });
}

static ATFORK: std::sync::Once = std::sync::Once::new();

extern "C" fn child_after_fork() {
    after_fork();
}

/// Fills `out` with random bytes (each handed out once per process).
pub fn fill(out: &mut [u8]) -> Result<(), RandomError> {
    if out.len() > BLOCK / 4 {
        // Large requests (keys) go straight to the kernel.
        return getrandom::getrandom(out).map_err(RandomError);
    }
    ATFORK.call_once(|| {
        // SAFETY: registers a plain function; it only touches this thread's buffer (the child
        // of a fork runs on the forking thread).
        unsafe { libc::pthread_atfork(None, None, Some(child_after_fork)) };
    });
    BUFFER.with(|b| {
        let mut b = b.borrow_mut();
        if BLOCK - b.next < out.len() {
            getrandom::getrandom(&mut b.bytes[..]).map_err(RandomError)?;
            b.next = 0;
        }
        let start = b.next;
        out.copy_from_slice(&b.bytes[start..start + out.len()]);
        // Never hand the same bytes out twice.
        b.bytes[start..start + out.len()].fill(0);
        b.next += out.len();
        Ok(())
    })
}

/// A random u64.
pub fn u64() -> Result<u64, RandomError> {
    let mut b = [0u8; 8];
    fill(&mut b)?;
    Ok(u64::from_le_bytes(b))
}

/// The next number of a fast generator (wyrand) for draws that need no secrecy, only speed
/// and an even spread: the fleet rate's pass-or-limit draw on every request. `state` is the
/// generator (per process; seed it from [`u64`] after fork).
pub fn fast_next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0xa076_1d64_78bd_642f);
    let t = u128::from(*state) * u128::from(*state ^ 0xe703_7ed1_a0b4_28db);
    ((t >> 64) as u64) ^ (t as u64)
}

/// Forgets buffered bytes: called in every new worker process.
pub fn after_fork() {
    BUFFER.with(|b| {
        if let Ok(mut b) = b.try_borrow_mut() {
            b.bytes.fill(0);
            b.next = BLOCK;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_are_not_repeated() {
        let mut seen = std::collections::HashSet::new();
        for _ in 0..10_000 {
            assert!(seen.insert(u64().unwrap()));
        }
        let mut big = [0u8; 2048];
        fill(&mut big).unwrap();
        assert!(big.iter().any(|&b| b != 0));
    }

    #[test]
    fn a_forked_child_does_not_repeat_its_parents_bytes() {
        u64().unwrap(); // the buffer holds bytes the child would otherwise repeat
        let mut fds = [0i32; 2];
        // SAFETY: plain pipe and fork; the child only computes, writes and exits.
        unsafe {
            assert_eq!(libc::pipe(fds.as_mut_ptr()), 0);
            let pid = libc::fork();
            assert!(pid >= 0);
            if pid == 0 {
                let x = u64().unwrap_or(0).to_le_bytes();
                libc::write(fds[1], x.as_ptr().cast(), 8);
                libc::_exit(0);
            }
            let mut buf = [0u8; 8];
            assert_eq!(libc::read(fds[0], buf.as_mut_ptr().cast(), 8), 8);
            libc::waitpid(pid, core::ptr::null_mut(), 0);
            let parent = u64().unwrap();
            assert_ne!(
                u64::from_le_bytes(buf),
                parent,
                "child repeated the parent's bytes"
            );
        }
    }

    #[test]
    fn fast_draws_spread_evenly() {
        let mut state = 42;
        let mut below = 0;
        for _ in 0..100_000 {
            if fast_next(&mut state) < u64::MAX / 4 {
                below += 1;
            }
        }
        assert!((24_000..26_000).contains(&below), "{below}");
    }

    #[test]
    fn after_fork_drops_the_buffer() {
        let a = u64().unwrap();
        after_fork();
        let b = u64().unwrap();
        assert_ne!(a, b);
    }
}
