//! Tests of the memory of the gateway's own writes: bounds, claims, lingering.

use super::*;

/// What is claimed is freed by the next marks at once.
fn without_linger(kept: Duration, capacity: usize) -> RecentWrites {
    RecentWrites { linger: Duration::ZERO, ..RecentWrites::bounded(kept, capacity) }
}

fn written(etag: &str) -> Expected {
    Expected::Written { etag: etag.into(), size: 1, modified: SystemTime::UNIX_EPOCH }
}

/// A sustained write rate to keys the watcher never settles (new keys linked into place
/// from unnamed files) once filled the map to its bound, then emptied it at once, under
/// the lock, with a warning each time. Now the oldest go one at a time and the newest stay.
#[test]
fn past_the_bound_the_oldest_are_forgotten_one_at_a_time() {
    let recent = without_linger(Duration::from_secs(120), 100);
    let mark = |i: usize| {
        recent.mark("b", &format!("k{i}"), Expected::Underway);
        recent.mark("b", &format!("k{i}"), written("e"));
    };
    for i in 0..150 {
        mark(i);
        assert_eq!(recent.len(), (i + 1).min(100), "full, never emptied");
    }
    assert!(recent.take("b", "k50", Some("e")) && !recent.take("b", "k49", Some("e")));
    for i in 150..1000 {
        mark(i);
    }
    assert_eq!(recent.len(), 100);
    assert!(recent.take("b", "k999", Some("e")), "the newest is remembered");
    assert!(recent.take("b", "k900", Some("e")));
    assert!(!recent.take("b", "k899", Some("e")), "the oldest were forgotten");
    assert!(recent.lock().crowded);
}

/// The watcher often sees a new key appear before the request that linked it settles its
/// mark. Nothing claimed such a change afterwards: it stayed first in line for `kept`,
/// nothing behind it was cleared, and sustained writes filled the memory to its bound (and
/// warned that it outgrew it). Now it is claimed when it settles, and the memory stays as
/// small as what the watcher has not seen yet.
#[test]
fn a_change_seen_under_way_is_claimed_when_it_settles_and_holds_nothing_back() {
    let recent = without_linger(Duration::from_secs(120), 1000);
    for i in 0..5000 {
        let key = format!("k{i}");
        recent.mark("b", &key, Expected::Underway);
        if i % 10 == 0 {
            // Seen while under way: by its name appearing, by its file found, by its going.
            match i % 30 {
                0 => recent.created("b", &key),
                10 => assert!(recent.known_file("b", &key, 1, SystemTime::UNIX_EPOCH)),
                _ => assert!(recent.take("b", &key, None)),
            }
            recent.mark("b", &key, written("e"));
            assert_eq!(recent.len(), 0, "claimed as it settled");
        } else {
            recent.mark("b", &key, written("e"));
            recent.created("b", &key);
        }
    }
    assert_eq!(recent.len(), 0);
    assert!(recent.lock().entries.len() <= 2 * CLEARED_PER_MARK, "{}", recent.lock().entries.len());
    assert!(!recent.lock().crowded, "never past its bound");
    // A change under way that the watcher saw, marked under way again, waits for its own.
    recent.mark("b", "again", Expected::Underway);
    recent.created("b", "again");
    recent.mark("b", "again", Expected::Underway);
    recent.mark("b", "again", written("f"));
    assert!(recent.take("b", "again", Some("f")));
}

/// What the watcher claims is only marked so (its thread frees nothing a request thread
/// allocated); the request threads' next marks free it, a few per mark.
#[test]
fn claimed_changes_are_freed_by_the_next_marks_not_by_the_watcher() {
    let recent = without_linger(Duration::from_secs(120), 1000);
    for i in 0..100 {
        recent.mark("b", &format!("k{i}"), written("e"));
    }
    for i in 0..100 {
        recent.created("b", &format!("k{i}"));
    }
    assert_eq!(recent.len(), 0, "claimed: as good as forgotten");
    assert!(!recent.take("b", "k7", Some("e")), "claimed, no longer lingering (no linger here)");
    assert_eq!(recent.lock().entries.len(), 100, "kept for a request thread to free");
    let marks = 100usize.div_ceil(CLEARED_PER_MARK);
    for i in 0..marks {
        recent.mark("b", &format!("new{i}"), written("e"));
    }
    assert_eq!(recent.lock().entries.len(), marks, "freed by the marks that followed");
    assert!(!recent.take("b", "k7", Some("e")), "freed: answers no more");
    assert_eq!(recent.lock().order.len(), marks);
    // A claimed key marked again is remembered again.
    recent.mark("b", "k0", written("f"));
    recent.created("b", "k0");
    recent.mark("b", "k0", written("g"));
    assert!(recent.take("b", "k0", Some("g")));
}

#[test]
fn a_change_older_than_kept_is_forgotten_when_the_next_is_marked() {
    let recent = without_linger(Duration::from_millis(50), 100);
    recent.mark("b", "old", written("e"));
    std::thread::sleep(Duration::from_millis(80));
    recent.mark("b", "new", written("e"));
    assert_eq!(recent.len(), 1);
    assert!(!recent.take("b", "old", Some("e")));
    assert!(recent.take("b", "new", Some("e")));
    assert!(!recent.lock().crowded, "forgetting by age is no crowding");
}

/// After a burst and a quiet spell, the next mark does not forget the whole burst under
/// the lock: a few aged changes go per mark, and every mark makes progress.
#[test]
fn aged_changes_go_a_few_per_mark() {
    let recent = without_linger(Duration::from_millis(50), 1000);
    for i in 0..100 {
        recent.mark("b", &format!("burst{i}"), written("e"));
    }
    std::thread::sleep(Duration::from_millis(80));
    recent.mark("b", "next", written("e"));
    assert_eq!(recent.len(), 101 - AGED_PER_MARK);
    for i in 0..5 {
        recent.mark("b", &format!("more{i}"), written("e"));
    }
    assert_eq!(recent.len(), 101 - 6 * AGED_PER_MARK + 5);
    for i in 5..20 {
        recent.mark("b", &format!("more{i}"), written("e"));
    }
    // The whole burst is gone; "next" and the 20 marked after it stay.
    assert_eq!(recent.len(), 21);
    assert!(!recent.take("b", "burst99", Some("e")), "an aged change is not answered for");
}

#[test]
fn a_key_marked_again_keeps_its_latest_change_and_one_place_in_line() {
    let recent = without_linger(Duration::from_secs(120), 2);
    recent.mark("b", "a", Expected::Underway);
    recent.mark("b", "a", written("1"));
    recent.mark("b", "a", Expected::Underway);
    recent.mark("b", "a", written("2"));
    assert_eq!(recent.lock().order.len(), 1);
    assert!(!recent.take("b", "a", Some("1")), "the earlier change is not the latest");
    assert!(recent.take("b", "a", Some("2")));
    // Taken keys leave their places behind; the line stays within twice the bound.
    for i in 0..10 {
        recent.mark("b", &format!("t{i}"), written("e"));
        assert!(recent.take("b", &format!("t{i}"), Some("e")));
    }
    assert!(recent.lock().order.len() <= 4);
    assert_eq!(recent.len(), 0);
}

/// The gateway's new keys reach the watcher only as the name appearing: that settles the
/// write, so a sustained write rate no longer keeps the map at its bound.
#[test]
fn a_write_is_settled_when_its_name_appears_and_one_under_way_is_kept() {
    let recent = without_linger(Duration::from_secs(120), 100);
    for i in 0..1000 {
        let key = format!("k{i}");
        recent.mark("b", &key, Expected::Underway);
        recent.mark("b", &key, written("e"));
        recent.created("b", &key);
    }
    assert_eq!(recent.len(), 0);
    assert!(!recent.lock().crowded);
    recent.mark("b", "busy", Expected::Underway);
    recent.created("b", "busy");
    assert!(recent.take("b", "busy", Some("anything")), "still under way");
    recent.mark("b", "gone", Expected::Gone);
    recent.created("b", "gone");
    assert!(recent.take("b", "gone", None), "a removal is not settled by a file appearing");
    recent.created("other", "k1");
    assert_eq!(recent.len(), 1);
}

/// Taken changes left their places in line until the line reached twice the bound: under
/// sustained writes settled by the watcher, 200,000 stale places, one cold eviction per
/// write. Now they are cleared as they come up, also when the key was marked again.
#[test]
fn places_of_taken_changes_leave_the_line_as_they_come_up() {
    let recent = without_linger(Duration::from_secs(120), 1000);
    for i in 0..5000 {
        let key = format!("k{}", i % 700);
        recent.mark("b", &key, Expected::Underway);
        recent.mark("b", &key, written("e"));
        // The watcher settles each a few writes later.
        if i >= 3 {
            recent.created("b", &format!("k{}", (i - 3) % 700));
        }
        assert!(recent.lock().order.len() <= 8, "write {i}: {} places", recent.lock().order.len());
    }
    assert_eq!(recent.len(), 3);
    assert!(!recent.lock().crowded);
    assert!(recent.take("b", "k99", Some("e")) && recent.take("b", "k98", Some("e")));
}

#[test]
fn an_underway_change_that_failed_is_forgotten_unless_marked_again() {
    let recent = RecentWrites::default();
    recent.mark("b", "k", Expected::Underway);
    assert!(recent.known_file("b", "k", 5, SystemTime::UNIX_EPOCH), "under way: the gateway's");
    recent.forget_underway("b", "k");
    assert!(!recent.known_file("b", "k", 5, SystemTime::UNIX_EPOCH));
    recent.mark("b", "k", written("e"));
    recent.forget_underway("b", "k");
    assert!(recent.known_file("b", "k", 1, SystemTime::UNIX_EPOCH), "settled, so kept");
    assert_eq!(recent.len(), 0, "claimed");
    assert!(!recent.known_file("b", "k", 1, SystemTime::now()), "another file at the key is not the gateway's");
}

/// A new key the gateway linked without remembering it, replaced at once by an overwrite:
/// the watcher read the first one's name appearing only after the overwrite was marked,
/// took it for the overwrite's, and claimed it; the overwrite's rename, read next, was
/// then announced again as someone's POSIX write (reproduced against a real gateway by
/// tests/test_notifications.py). A claimed change still answers for the file it left.
#[test]
fn a_change_claimed_by_an_earlier_changes_event_still_answers_for_its_own() {
    let recent = RecentWrites::default();
    let at = SystemTime::UNIX_EPOCH + Duration::from_secs(7);
    let overwrite = Expected::Written { etag: "e2".into(), size: 2, modified: at };
    for events_before_settled in [true, false] {
        recent.mark("b", "k", Expected::Underway);
        if events_before_settled {
            recent.created("b", "k");
        }
        recent.mark("b", "k", overwrite.clone());
        if !events_before_settled {
            recent.created("b", "k");
        }
        assert_eq!(recent.len(), 0, "claimed by the earlier write's event");
        assert!(recent.known_file("b", "k", 2, at), "the overwrite's rename is the gateway's");
        assert!(recent.take("b", "k", Some("e2")));
        assert!(!recent.take("b", "k", Some("e3")));
    }
}

/// What the watcher claimed is kept `linger` after it was marked (answering for its file),
/// then freed by the next marks.
#[test]
fn a_claimed_change_lingers_before_it_is_freed() {
    let recent = RecentWrites { linger: Duration::from_millis(100), ..RecentWrites::default() };
    recent.mark("b", "k", written("e"));
    recent.created("b", "k");
    for i in 0..100 {
        recent.mark("b", &format!("n{i}"), written("e"));
        recent.created("b", &format!("n{i}"));
    }
    assert!(recent.take("b", "k", Some("e")), "claimed, lingering");
    std::thread::sleep(Duration::from_millis(150));
    for i in 0..10 {
        recent.mark("b", &format!("m{i}"), written("e"));
    }
    assert!(!recent.take("b", "k", Some("e")), "freed once it lingered");
    assert!(!recent.lock().crowded, "freeing what was claimed is no crowding");
}

/// A new key's name appearing, read after an overwrite of that key was marked, is an earlier
/// change's: the overwrite arrives by a rename, and its own rename is what claims it.
#[test]
fn a_name_appearing_is_not_taken_for_a_change_that_arrives_by_rename() {
    let recent = RecentWrites::default();
    let at = SystemTime::UNIX_EPOCH + Duration::from_secs(9);
    recent.mark("b", "k", Expected::Underway);
    recent.created("b", "k");
    recent.arrives_by_rename("b", "k");
    recent.created("b", "k");
    recent.mark("b", "k", Expected::Written { etag: "e".into(), size: 3, modified: at });
    recent.created("b", "k");
    assert_eq!(recent.len(), 1, "not claimed by an earlier change's event");
    assert!(recent.known_file("b", "k", 3, at), "claimed by its own rename");
    assert_eq!(recent.len(), 0);
    // The next change of the key starts as arriving however it will.
    recent.mark("b", "k", Expected::Underway);
    recent.created("b", "k");
    recent.mark("b", "k", written("f"));
    assert_eq!(recent.len(), 0, "a new key's own name appearing claims it");
}

/// A claimed change answers for what it left only while it lingers: a user's change made
/// later (a delete, here) is not taken for the gateway's, though the claimed change is not
/// freed until the next marks come.
#[test]
fn a_claimed_change_answers_only_while_it_lingers() {
    let recent = RecentWrites { linger: Duration::from_millis(50), ..RecentWrites::default() };
    recent.mark("b", "k", Expected::Underway);
    recent.mark("b", "k", Expected::Gone);
    assert!(recent.take("b", "k", None), "the gateway's delete");
    assert!(recent.take("b", "k", None), "claimed, lingering");
    std::thread::sleep(Duration::from_millis(80));
    assert!(!recent.take("b", "k", None), "a later delete is someone else's");
    assert_eq!(recent.lock().entries.len(), 1, "not freed yet: no mark came");
}
