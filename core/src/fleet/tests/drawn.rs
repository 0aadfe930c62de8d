//! Places drawn from the pool for clients turned away, and the holds that keep them theirs.

use super::*;

#[test]
fn places_drawn_for_those_turned_away_are_theirs() {
    let mut mem = Mem(vec![0; 1 << 15]);
    let mut n = node(&mut mem);
    let c = cfg();
    // Nobody waits anywhere: everyone may come in, as far as the share goes.
    show(
        &mut n,
        &RoomPicture {
            cursor: u64::MAX,
            rightful: u64::MAX,
            quota: 1,
            nodes: 1,
            window_ms: 1000,
            free: 2,
            ..RoomPicture::default()
        },
        1001,
    );
    assert_eq!(n.visit(w(1, 1010), 1010, &c), FleetVerdict::Admit);
    // The share is used up: B is turned away for a moment, and a place drawn for it.
    assert!(waits(n.visit(w(2, 1020), 1020, &c)));
    assert_eq!(n.take_draw(1020, &c).map(|a| a.want), Some(1));
    n.drawn(1, got(1));
    // C, who came after B, does not take B's place ...
    assert!(waits(n.visit(w(3, 1030), 1030, &c)));
    // ... which B finds when it comes back.
    assert_eq!(n.visit(w(2, 1020), 1500, &c), FleetVerdict::Admit);
    // D, who came before B, is turned away: its request waits for the draw and claims
    // the place it brought.
    assert!(matches!(
        n.visit(w(4, 1005), 1510, &c),
        FleetVerdict::Wait {
            eta_secs: Some(0),
            ..
        }
    ));
    assert_eq!(n.take_draw(1510, &c).map(|a| a.want), Some(1));
    n.drawn(1, got(1));
    assert_eq!(n.claim(4, 1005, 1512, &c), FleetVerdict::Admit);
    // The pool had nothing for E (who came before D): it waits, by its place in the line.
    assert!(waits(n.visit(w(5, 1002), 1520, &c)));
    assert_eq!(n.take_draw(1520, &c).map(|a| a.want), Some(1));
    n.drawn(1, got(0));
    assert!(waits(n.claim(5, 1002, 1522, &c)));
    let admitted: Vec<u64> = n.take_report().admitted.iter().map(|e| e.sid).collect();
    assert_eq!(admitted, vec![1, 2, 4]);
}

/// A picture of an empty line answering a sync that left before the client the node holds the
/// cursor at came cannot know it: the hold stays, and those who came later neither come in nor
/// draw ahead of it (t/290 TEST 5 saw a second draw for a later newcomer). A picture answering
/// a sync sent after the held client came, and still showing nobody, ends the hold.
#[test]
fn a_picture_that_cannot_know_the_held_client_keeps_the_hold() {
    let mut mem = Mem(vec![0; 1 << 15]);
    let mut n = node(&mut mem);
    let c = cfg();
    let empty = RoomPicture {
        fleet_active: 1,
        cursor: u64::MAX,
        rightful: u64::MAX,
        nodes: 1,
        window_ms: 1000,
        ..RoomPicture::default()
    };
    n.next_sync(900, 1, &c);
    show(&mut n, &empty, 1001);
    // B finds no place here: turned away, a draw for it, the pool empty.
    assert!(waits(n.visit(w(2, 1020), 1020, &c)));
    assert_eq!(n.take_draw(1020, &c).map(|a| a.want), Some(1));
    n.drawn(1, got(0));
    // The next picture answers a sync that left before B came (at 1010): still "nobody waits".
    n.next_sync(1010, 1, &c);
    show(
        &mut n,
        &RoomPicture {
            window_ms: 2000,
            ..empty.clone()
        },
        1100,
    );
    // C, who came after B, waits behind it and sends no draw.
    assert!(waits(n.visit(w(3, 1110), 1110, &c)));
    assert_eq!(n.take_draw(1110, &c), None);
    // B, back, is the one whose turn it is: the new picture is worth a draw for it.
    assert!(waits(n.visit(w(2, 1020), 1120, &c)));
    assert_eq!(n.take_draw(1120, &c).map(|a| a.oldest), Some(1020));
    n.drawn(1, got(0));
    // A picture answering a sync sent after B and C came, showing nobody (they left): no hold.
    n.next_sync(1200, 1, &c);
    show(
        &mut n,
        &RoomPicture {
            window_ms: 3000,
            ..empty.clone()
        },
        1300,
    );
    assert!(waits(n.visit(w(4, 1310), 1310, &c)));
    assert_eq!(n.take_draw(1310, &c).map(|a| a.oldest), Some(1310));
}
