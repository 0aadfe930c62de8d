//! The room's table of events made at run time ([S18], `event::runtime`), kept in the room's
//! memory so every worker reads the same and a reload keeps it. The room keeps the text only;
//! workers read it (again) when its generation changes.

use super::Room;
use crate::event::runtime::MAX_TABLE_BYTES;

/// The table does not fit the room's memory for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the events made at run time take more than {MAX_TABLE_BYTES} bytes")]
pub struct TableTooLong;

impl Room<'_> {
    /// Changes whenever the table's text does (0: never written).
    pub fn events_generation(&self) -> u64 {
        self.events.generation
    }

    /// The table's text, and (a Redis store) the version of the fleet's table it copies.
    pub fn events_table(&self) -> (&str, u64) {
        let t = &*self.events;
        let len = (t.len as usize).min(t.text.len());
        let text = t.text.get(..len).unwrap_or_default();
        // Written from a `&str` only; anything else (memory that is not a table) reads empty.
        (core::str::from_utf8(text).unwrap_or(""), t.remote_version)
    }

    /// Writes the table's text (the generation moves when it differs) and, for a Redis
    /// store, the version of the fleet's table it copies.
    pub fn set_events_table(
        &mut self,
        text: &str,
        remote_version: Option<u64>,
    ) -> Result<(), TableTooLong> {
        let t = &mut *self.events;
        let bytes = text.as_bytes();
        if bytes.len() > t.text.len() {
            return Err(TableTooLong);
        }
        if let Some(v) = remote_version {
            t.remote_version = v;
        }
        let len = (t.len as usize).min(t.text.len());
        if t.text.get(..len) == Some(bytes) {
            return Ok(());
        }
        t.text[..bytes.len()].copy_from_slice(bytes);
        t.len = bytes.len() as u32;
        t.generation = t.generation.wrapping_add(1).max(1);
        Ok(())
    }

    /// A Redis store: whether this worker should ask Redis for the fleet's table now (at most
    /// once per `every_ms` for the node); if so, the moment is noted for the node.
    pub fn claim_events_fetch(&mut self, now: u64, every_ms: u64) -> bool {
        let t = &mut *self.events;
        if now.saturating_sub(t.fetched_at) < every_ms && t.fetched_at <= now {
            return false;
        }
        t.fetched_at = now;
        true
    }
}

#[cfg(test)]
mod tests {
    use crate::room::Room;

    #[test]
    fn the_table_keeps_its_text_and_tells_a_change() {
        let mut mem = vec![0u64; 8192];
        let bytes = unsafe { core::slice::from_raw_parts_mut(mem.as_mut_ptr().cast(), 65536) };
        let mut room = Room::format(bytes, 1).unwrap();
        assert_eq!(room.events_generation(), 0);
        assert_eq!(room.events_table(), ("", 0));
        room.set_events_table("drop room=shop start=@2", Some(3))
            .unwrap();
        let g = room.events_generation();
        assert!(g > 0);
        assert_eq!(room.events_table(), ("drop room=shop start=@2", 3));
        // The same text again: no change to see.
        room.set_events_table("drop room=shop start=@2", Some(4))
            .unwrap();
        assert_eq!(room.events_generation(), g);
        room.set_events_table("", None).unwrap();
        assert!(room.events_generation() > g);
        assert_eq!(room.events_table(), ("", 4));
        assert!(room.set_events_table(&"x".repeat(5000), None).is_err());
        // One fetch per interval for the node.
        assert!(room.claim_events_fetch(10_000, 1000));
        assert!(!room.claim_events_fetch(10_500, 1000));
        assert!(room.claim_events_fetch(11_000, 1000));
    }
}
