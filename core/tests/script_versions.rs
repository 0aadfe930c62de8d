//! What each of the three scripts needs of the server, read from its real text the way the
//! module reads it when it sets a zone's client up (`version::script_needs` on the `SCRIPT
//! LOAD` command). This pins the version table: a script that starts or stops using a late
//! option changes a line here, and the documentation's versions (docs/redis.md) with it.
//! No server needed.

use smart_limit_core::fleet::FleetScript;
use smart_limit_core::rate::SyncScript;
use smart_limit_core::redis::version::{self, RedisVersion};
use smart_limit_core::redis::Script as RoomScript;

#[test]
fn the_central_room_and_the_rate_zone_need_4_0() {
    assert_eq!(
        version::script_needs(&RoomScript::load_command()),
        version::NEEDS_SCRIPTS
    );
    assert_eq!(
        version::script_needs(&SyncScript::load_command()),
        version::NEEDS_SCRIPTS
    );
    assert_eq!(version::NEEDS_SCRIPTS.version, RedisVersion::new(4, 0, 0));
}

#[test]
fn the_synced_room_needs_6_2_for_zadd_gt() {
    assert_eq!(
        version::script_needs(&FleetScript::load_command()),
        version::NEEDS_ZADD_GT
    );
    assert_eq!(version::NEEDS_ZADD_GT.version, RedisVersion::new(6, 2, 0));
}
