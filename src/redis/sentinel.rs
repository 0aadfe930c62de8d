//! Sentinel: the master's address read from a Sentinel's answer, and on to it.

use core::task::Waker;
use std::rc::Rc;

use smart_limit_core::redis::resp::{self};
use smart_limit_core::redis::{self};

use crate::net::peer::Addr;

use super::*;

impl Client {
    /// A Sentinel's answer: the master's address, and on to it. Ok(false): not complete yet.
    pub(super) fn discovered(
        &self,
        st: &mut State,
        now: u64,
        wake: &mut Vec<Waker>,
    ) -> Result<bool, ClientError> {
        let Some((value, _)) =
            resp::parse(&st.inbuf).map_err(|e| ClientError::Protocol(Rc::from(e.to_string())))?
        else {
            return Ok(false);
        };
        let addr = redis::master_address(&value)
            .map(Addr::from_socket)
            .ok_or_else(|| {
                ClientError::Discovery(Rc::from(match value.error_text() {
                    Some(e) => format!("a sentinel answered: {e}"),
                    None => "a sentinel does not know the master".to_string(),
                }))
            })?;
        self.close(st);
        st.target = Some(addr);
        self.open(st, now, wake);
        Ok(true)
    }
}
