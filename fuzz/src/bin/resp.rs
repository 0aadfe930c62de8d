//! Fuzz target: the RESP2 reply parser (`resp::parse`) on bytes from the network (a broken
//! or hostile Redis server).
//!
//! Properties, for a complete reply `(value, used)`: `0 < used <= input.len()`; the reply
//! is self-delimiting (parsing exactly `used` bytes gives the same answer); one byte less
//! is "need more bytes", never an error (the module parses a growing buffer as a reply
//! arrives in pieces, so an error there would drop a valid reply). Each reply also goes
//! through the server version check (`version::check`: an `INFO` reply, or anything else).

use smart_limit_core::redis::resp::parse;
use smart_limit_core::redis::version;

fn main() {
    afl::fuzz!(|data: &[u8]| {
        let Ok(Some((value, used))) = parse(data) else {
            return;
        };
        assert!(
            used > 0 && used <= data.len(),
            "used {used} of {}",
            data.len()
        );
        let _ = std::hint::black_box((value.kind(), value.error_text()));
        let _ = std::hint::black_box(version::check(&value, &version::NEEDS_ZADD_GT));
        assert_eq!(
            parse(&data[..used]),
            Ok(Some((value, used))),
            "not self-delimiting"
        );
        assert_eq!(
            parse(&data[..used - 1]),
            Ok(None),
            "a reply one byte short is not 'more'"
        );
    });
}
