use std::io::Write;
use std::time::{Duration, SystemTime};

use isthmus_store::state_dir::{StateDir, StateTrust};

use super::*;
use crate::event::{Event, EventName};

pub(crate) const A: &str = "arn:isthmus:sqs::a:webhook";
pub(crate) const B: &str = "arn:isthmus:sqs::b:webhook";

/// A state directory `notify` in a temporary data root.
pub(crate) fn state() -> (tempfile::TempDir, StateDir) {
    let root = tempfile::tempdir().unwrap();
    let state = StateDir::open_path(root.path(), StateTrust::Gateway).unwrap().subdir("notify", true).unwrap().unwrap();
    (root, state)
}

pub(crate) fn event(key: &str) -> Event {
    Event {
        name: EventName::ObjectCreatedPut,
        bucket: "b".into(),
        key: key.into(),
        size: 1,
        etag: Some("e".into()),
        version_id: None,
        principal: "p".into(),
        source_ip: "127.0.0.1".into(),
        time: SystemTime::now(),
        region: "us-east-1".into(),
        bucket_owner: "o".into(),
    }
}

pub(crate) fn to(arns: &[&str]) -> Vec<Target> {
    arns.iter().map(|arn| Target { configuration_id: "rule".into(), arn: arn.to_string() }).collect()
}

fn limits(max_bytes: u64, when_full: WhenFull) -> QueueLimits {
    QueueLimits { max_bytes, when_full, strict_sync: false }
}

fn open(dir: &StateDir, max_bytes: u64, when_full: WhenFull) -> Arc<Queue> {
    Queue::open(dir.clone(), vec![A.into(), B.into()], limits(max_bytes, when_full)).unwrap()
}

/// Takes every record waiting for `dest`, acknowledging each: (sequencer, key).
fn drain(queue: &Queue, dest: usize) -> Vec<(u64, String)> {
    let mut got = Vec::new();
    while let Some((seq, entry)) = queue.next(dest).unwrap() {
        queue.ack(dest, seq);
        got.push((seq, entry.event.key.clone()));
    }
    got
}

/// Every key for destination 0, taken `max` at a time as delivery takes them, each acknowledged.
fn drain_in_batches(queue: &Queue, max: usize) -> Vec<String> {
    let mut got = Vec::new();
    loop {
        let batch = queue.next_batch(0, max).unwrap();
        if batch.is_empty() {
            return got;
        }
        for (seq, entry) in batch {
            assert_eq!(seq, entry.seq);
            queue.ack(0, seq);
            got.push(entry.event.key.clone());
        }
    }
}

fn keys(records: &[(u64, String)]) -> Vec<&str> {
    records.iter().map(|(_, key)| key.as_str()).collect()
}

fn segment_files(root: &tempfile::TempDir) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(root.path().join(".isthmus/notify"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_str().unwrap().starts_with("seg-"))
        .collect();
    files.sort();
    files
}

#[test]
fn records_come_out_in_order_and_files_are_private() {
    let (root, dir) = state();
    let queue = open(&dir, 1 << 20, WhenFull::Refuse);
    for key in ["k1", "k2", "k3"] {
        queue.enqueue(event(key), to(&[A])).unwrap();
    }
    let got = drain(&queue, 0);
    assert_eq!(keys(&got), ["k1", "k2", "k3"]);
    assert!(got.windows(2).all(|w| w[0].0 < w[1].0));
    assert_eq!(queue.next(0).unwrap().map(|(s, _)| s), None);
    use std::os::unix::fs::PermissionsExt;
    for file in segment_files(&root) {
        assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
    }
    assert!(matches!(
        queue.enqueue(event("x"), to(&["arn:isthmus:sqs::nobody:webhook"])),
        Err(NotifyError::UnknownDestination(_))
    ));
    assert_eq!(queue.enqueue(event("x"), vec![]).unwrap(), None);
}

#[test]
fn a_reopened_queue_resumes_at_the_saved_cursor_and_sends_the_unsaved_again() {
    let (_root, dir) = state();
    let queue = open(&dir, 1 << 20, WhenFull::Refuse);
    for key in ["k1", "k2", "k3", "k4"] {
        queue.enqueue(event(key), to(&[A])).unwrap();
    }
    for _ in 0..2 {
        let (seq, _) = queue.next(0).unwrap().unwrap();
        queue.ack(0, seq);
    }
    queue.save_cursor(0).unwrap();
    let (seq, _) = queue.next(0).unwrap().unwrap();
    queue.ack(0, seq); // delivered, not saved: a crash now
    drop(queue);
    let queue = open(&dir, 1 << 20, WhenFull::Refuse);
    assert_eq!(keys(&drain(&queue, 0)), ["k3", "k4"], "at least once: k3 again");
    assert_eq!(queue.stats().pending, vec![(0, 0.0), (0, 0.0)]);
}

#[test]
fn the_sequencer_keeps_increasing_across_reopen_even_when_everything_was_delivered() {
    let (_root, dir) = state();
    let queue = open(&dir, 1 << 20, WhenFull::Refuse);
    let first = queue.enqueue(event("k1"), to(&[A])).unwrap().unwrap();
    let second = queue.enqueue(event("k2"), to(&[A])).unwrap().unwrap();
    assert!(second > first);
    drain(&queue, 0);
    queue.close().unwrap();
    queue.save_cursors().unwrap();
    drop(queue);
    let queue = open(&dir, 1 << 20, WhenFull::Refuse);
    let third = queue.enqueue(event("k3"), to(&[A])).unwrap().unwrap();
    assert!(third > second, "{third} after {second}");
    assert_eq!(drain(&queue, 0), vec![(third, "k3".to_string())]);
}

#[test]
fn a_torn_tail_is_cut_off_and_the_queue_goes_on() {
    let (root, dir) = state();
    let queue = open(&dir, 1 << 20, WhenFull::Refuse);
    for key in ["k1", "k2"] {
        queue.enqueue(event(key), to(&[A])).unwrap();
    }
    drop(queue);
    let segment = segment_files(&root).pop().unwrap();
    let whole = std::fs::metadata(&segment).unwrap().len();
    // Half a frame: a header announcing 500 bytes and 10 of them.
    let mut file = std::fs::OpenOptions::new().append(true).open(&segment).unwrap();
    file.write_all(&500u32.to_le_bytes()).unwrap();
    file.write_all(&[0u8; 14]).unwrap();
    drop(file);
    let queue = open(&dir, 1 << 20, WhenFull::Refuse);
    assert_eq!(std::fs::metadata(&segment).unwrap().len(), whole, "cut back to the last whole frame");
    queue.enqueue(event("k3"), to(&[A])).unwrap();
    assert_eq!(keys(&drain(&queue, 0)), ["k1", "k2", "k3"]);
}

#[test]
fn a_huge_frame_length_is_corruption_never_an_allocation() {
    let (root, dir) = state();
    let queue = open(&dir, 1 << 20, WhenFull::Refuse);
    for key in ["k1", "k2"] {
        queue.enqueue(event(key), to(&[A])).unwrap();
    }
    drop(queue);
    let segment = segment_files(&root).pop().unwrap();
    let whole = std::fs::metadata(&segment).unwrap().len();
    let mut file = std::fs::OpenOptions::new().append(true).open(&segment).unwrap();
    file.write_all(&0xFFFF_FFF0u32.to_le_bytes()).unwrap();
    file.write_all(&[7u8; 4096]).unwrap();
    drop(file);
    let queue = open(&dir, 1 << 20, WhenFull::Refuse);
    assert_eq!(std::fs::metadata(&segment).unwrap().len(), whole);
    assert_eq!(keys(&drain(&queue, 0)), ["k1", "k2"]);
}

#[test]
fn a_flipped_byte_cuts_that_record_and_keeps_the_ones_before() {
    let (root, dir) = state();
    let queue = open(&dir, 1 << 20, WhenFull::Refuse);
    for key in ["k1", "k2"] {
        queue.enqueue(event(key), to(&[A])).unwrap();
    }
    drop(queue);
    let segment = segment_files(&root).pop().unwrap();
    let mut bytes = std::fs::read(&segment).unwrap();
    let last = bytes.len() - 3;
    bytes[last] ^= 0x55;
    std::fs::write(&segment, &bytes).unwrap();
    let queue = open(&dir, 1 << 20, WhenFull::Refuse);
    assert_eq!(keys(&drain(&queue, 0)), ["k1"]);
}

/// A frame damaged while queued (after the queue read its segments) is found when delivery
/// reads its run back: the records before it in the run are delivered, it is counted dropped,
/// and the ones after it follow.
#[test]
fn a_frame_damaged_while_queued_is_skipped_within_its_run() {
    use std::os::unix::fs::FileExt;
    let (root, dir) = state();
    let queue = open(&dir, 1 << 20, WhenFull::Refuse);
    for i in 0..10 {
        queue.enqueue(event(&format!("k{i}")), to(&[A])).unwrap();
    }
    let frame = queue.stats().bytes / 10;
    let segment = std::fs::OpenOptions::new().write(true).open(segment_files(&root).pop().unwrap()).unwrap();
    // A byte in the payload of the fifth record (frames here are all of one length).
    segment.write_all_at(&[0xff], 4 * frame + frame / 2).unwrap();
    let got = drain_in_batches(&queue, 64);
    assert_eq!(got, ["k0", "k1", "k2", "k3", "k5", "k6", "k7", "k8", "k9"]);
    assert_eq!(queue.stats().dropped, 1);
}

#[test]
fn refuse_fails_when_full_and_takes_again_once_delivered() {
    let (_root, dir) = state();
    let queue = open(&dir, 16 << 10, WhenFull::Refuse);
    let mut taken = 0;
    let err = loop {
        match queue.enqueue(event(&format!("k{taken}")), to(&[A])) {
            Ok(_) => taken += 1,
            Err(err) => break err,
        }
        assert!(taken < 1000);
    };
    assert!(matches!(err, NotifyError::Full), "{err}");
    assert!(taken > 10);
    assert!(!queue.has_room());
    assert!(!queue.wait_for_room(Duration::from_millis(20)));
    assert_eq!(drain(&queue, 0).len(), taken);
    assert!(queue.has_room());
    queue.enqueue(event("again"), to(&[A])).unwrap();
    assert_eq!(queue.stats().dropped, 0);
}

#[test]
fn drop_oldest_keeps_the_newest_and_counts_the_dropped() {
    let (root, dir) = state();
    let queue = open(&dir, 16 << 10, WhenFull::DropOldest);
    for i in 0..300 {
        queue.enqueue(event(&format!("k{i:03}")), to(&[A, B])).unwrap();
    }
    let stats = queue.stats();
    assert!(stats.bytes <= 16 << 10);
    assert!(stats.dropped > 200, "{stats:?}");
    let kept = drain(&queue, 0);
    assert_eq!(kept.len() as u64 + stats.dropped, 300);
    assert_eq!(kept.last().unwrap().1, "k299");
    assert!(kept.windows(2).all(|w| w[0].0 + 1 == w[1].0), "the newest, contiguous");
    assert_eq!(drain(&queue, 1).len(), kept.len(), "B's cursor moved past the dropped too");
    assert!(segment_files(&root).len() <= 2, "segments passed by every cursor are deleted");
}

#[test]
fn block_waits_for_room_made_by_a_delivery() {
    let (_root, dir) = state();
    let queue = open(&dir, 16 << 10, WhenFull::Block);
    queue.enqueue(event("fill"), to(&[A])).unwrap();
    let frame = queue.stats().bytes;
    // Full: less than one more frame of room.
    while queue.stats().bytes + frame <= 16 << 10 {
        queue.enqueue(event("fill"), to(&[A])).unwrap();
    }
    assert!(!queue.wait_for_room(Duration::from_millis(20)));
    let consumer = {
        let queue = queue.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            let (seq, _) = queue.next(0).unwrap().unwrap();
            queue.ack(0, seq);
        })
    };
    let started = std::time::Instant::now();
    queue.enqueue(event("last"), to(&[A])).unwrap();
    assert!(started.elapsed() >= Duration::from_millis(150), "it waited for the delivery");
    // Woken by the delivery that made room (a writer waiting is counted, so it is notified),
    // not by its own deadline.
    assert!(started.elapsed() < BLOCK_LIMIT / 2, "{:?}", started.elapsed());
    consumer.join().unwrap();
    assert_eq!(drain(&queue, 0).last().unwrap().1, "last");
}

#[test]
fn two_destinations_have_independent_cursors() {
    let (_root, dir) = state();
    let queue = open(&dir, 1 << 20, WhenFull::Refuse);
    queue.enqueue(event("a1"), to(&[A])).unwrap();
    queue.enqueue(event("both"), to(&[A, B])).unwrap();
    queue.enqueue(event("b1"), to(&[B])).unwrap();
    assert_eq!(queue.stats().pending.iter().map(|p| p.0).collect::<Vec<_>>(), [2, 2]);
    assert_eq!(keys(&drain(&queue, 0)), ["a1", "both"]);
    assert_eq!(queue.stats().pending[0].0, 0);
    assert_eq!(queue.stats().pending[1].0, 2);
    assert!(queue.stats().bytes > 0, "B still needs two");
    queue.save_cursors().unwrap();
    drop(queue);
    let queue = open(&dir, 1 << 20, WhenFull::Refuse);
    assert_eq!(drain(&queue, 0), vec![]);
    assert_eq!(keys(&drain(&queue, 1)), ["both", "b1"]);
    assert_eq!(queue.stats().bytes, 0);
}

#[test]
fn one_process_per_queue_and_a_planted_link_is_refused() {
    let (root, dir) = state();
    let queue = open(&dir, 1 << 20, WhenFull::Refuse);
    let second = Queue::open(dir.clone(), vec![A.into()], limits(1 << 20, WhenFull::Refuse));
    assert!(matches!(second, Err(NotifyError::Busy(_))));
    drop(queue);
    std::os::unix::fs::symlink("/etc/passwd", root.path().join(".isthmus/notify/seg-00000000000000ff.log")).unwrap();
    let err = Queue::open(dir.clone(), vec![A.into()], limits(1 << 20, WhenFull::Refuse)).err().unwrap();
    assert!(matches!(err, NotifyError::State(_)), "{err}");
}

#[test]
fn a_strict_queue_syncs_each_record_and_reads_it_back() {
    let (_root, dir) = state();
    let strict = QueueLimits { max_bytes: 1 << 20, when_full: WhenFull::Refuse, strict_sync: true };
    let queue = Queue::open(dir.clone(), vec![A.into()], strict).unwrap();
    queue.enqueue(event("k1"), to(&[A])).unwrap();
    drop(queue);
    let queue = Queue::open(dir, vec![A.into()], strict).unwrap();
    assert_eq!(keys(&drain(&queue, 0)), ["k1"]);
}

/// Delivery reads records back from their segments in runs (one pread each, at most
/// `READ_RUN` bytes), across segment boundaries, in order; what it delivered is released.
#[test]
fn delivery_reads_runs_back_across_segments_in_order() {
    let (root, dir) = state();
    let queue = open(&dir, 2 << 20, WhenFull::Refuse);
    let count = 5000;
    for i in 0..count {
        queue.enqueue(event(&format!("k{i:05}")), to(&[A])).unwrap();
    }
    let bytes = queue.stats().bytes;
    assert!(bytes > 2 * READ_RUN, "more than two runs' worth: {bytes}");
    assert!(segment_files(&root).len() > 2, "over several segments");
    // Batches larger than a run, so that runs end at READ_RUN and at segment ends.
    let got = drain_in_batches(&queue, 4096);
    let want: Vec<String> = (0..count).map(|i| format!("k{i:05}")).collect();
    assert_eq!(got, want);
    assert_eq!(queue.stats().bytes, 0, "delivered records are released");
    assert!(segment_files(&root).len() <= 1, "and the segments they filled deleted");
}

/// A frame of `payload` as a segment holds it.
fn framed(payload: &[u8]) -> Vec<u8> {
    let mut frame = (payload.len() as u32).to_le_bytes().to_vec();
    frame.extend_from_slice(&(crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, payload) as u32).to_le_bytes());
    frame.extend_from_slice(payload);
    frame
}

/// The entry of the frame at the start of a new segment holding `frame` alone.
fn read_back(frame: &[u8]) -> Result<(Entry, u64), segment::BadFrame> {
    let (root, dir) = state();
    let file = segment::open(&dir, 1, true).unwrap();
    file.write_all_at(frame, 0).unwrap();
    let back = segment::read_frame(&file, 0, frame.len() as u64);
    drop(root);
    back
}

#[test]
fn a_frame_numbered_under_the_lock_reads_back_whole_and_numbered_again_it_reads_the_new_number() {
    let mut removal = event("gone");
    (removal.name, removal.etag, removal.version_id) = (EventName::ObjectRemovedDelete, None, Some("v 1".into()));
    for entry in [
        Entry { seq: 12_345, queued_ms: 17, event: event("k \"quoted\" é"), targets: to(&[A, B]) },
        Entry { seq: u64::MAX, queued_ms: 0, event: removal, targets: vec![] },
    ] {
        let mut body = segment::Body::new(entry.queued_ms, &entry.event, &entry.targets).unwrap();
        body.number(1);
        let frame = body.number(entry.seq).to_vec();
        let (back, len) = read_back(&frame).unwrap();
        assert_eq!(len, frame.len() as u64);
        assert_eq!(
            (back.seq, back.queued_ms, &back.event, &back.targets),
            (entry.seq, entry.queued_ms, &entry.event, &entry.targets)
        );
    }
}

#[test]
fn a_queue_written_before_the_binary_frames_still_reads() {
    // As serde wrote every entry before: the JSON of the whole entry.
    let entry = Entry { seq: 7, queued_ms: 3, event: event("old"), targets: to(&[A]) };
    let (back, _) = read_back(&framed(&serde_json::to_vec(&entry).unwrap())).unwrap();
    assert_eq!((back.seq, back.event, back.targets), (7, entry.event, entry.targets));
}

#[test]
fn a_binary_entry_that_lies_about_its_lengths_is_corrupt_and_allocates_nothing_it_claims() {
    let entry = Entry { seq: 9, queued_ms: 3, event: event("k"), targets: to(&[A]) };
    let mut body = segment::Body::new(entry.queued_ms, &entry.event, &entry.targets).unwrap();
    let good = body.number(9)[segment::HEADER..].to_vec();
    let corrupt = |payload: &[u8]| matches!(read_back(&framed(payload)), Err(segment::BadFrame::Corrupt(_)));
    // The bucket's length (after version, seq, queued_ms, name, size and time) claims 4 GiB.
    let at = 1 + 8 + 8 + 1 + 8 + 12;
    let mut huge = good.clone();
    huge[at..at + 4].copy_from_slice(&0xffff_fffeu32.to_le_bytes());
    assert!(corrupt(&huge));
    // A target count past what the bytes can hold.
    let mut many = good.clone();
    let count_at = good.len() - (4 + "rule".len() + 4 + A.len()) - 2;
    many[count_at..count_at + 2].copy_from_slice(&u16::MAX.to_le_bytes());
    assert!(corrupt(&many));
    // An event name past the known ones, bytes left over, a cut, invalid UTF-8, an unknown version.
    let mut name = good.clone();
    name[17] = 200;
    assert!(corrupt(&name));
    assert!(corrupt(&[good.as_slice(), b"x"].concat()));
    assert!(corrupt(&good[..good.len() - 1]));
    let mut utf8 = good.clone();
    utf8[at + 4] = 0xff;
    assert!(corrupt(&utf8));
    let mut version = good.clone();
    version[0] = 2;
    assert!(corrupt(&version));
    assert!(read_back(&framed(&good)).is_ok());
}

#[test]
fn acknowledging_a_batch_at_once_releases_its_records_for_that_destination_only() {
    let (_root, dir) = state();
    let queue = open(&dir, 1 << 20, WhenFull::Refuse);
    for key in ["a", "b", "c"] {
        queue.enqueue(event(key), to(&[A, B])).unwrap();
    }
    let batch = queue.next_batch(0, 64).unwrap();
    queue.ack_all(0, batch.iter().map(|(seq, _)| *seq));
    assert!(queue.next(0).unwrap().is_none());
    assert_eq!(keys(&drain(&queue, 1)), ["a", "b", "c"]);
    assert_eq!(queue.stats().bytes, 0);
}
