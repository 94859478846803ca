//! An entry's bytes in a segment: a compact binary form, written by the request that caused
//! the event (where every microsecond is the PUT's), and read back by delivery and at open.
//! Queues written before it hold JSON entries; those still read (`decode` tells them apart by
//! their first byte, `{`, which no binary entry starts with).
//!
//! Binary entry, version 1 (integers little-endian):
//! `[1][seq: u64][queued_ms: u64][event name: u8][size: u64][time: u64 seconds, u32 nanoseconds]`
//! then the strings bucket, key, etag?, version_id?, principal, source_ip, region,
//! bucket_owner, each `[length: u32][UTF-8]` (an absent optional one is the length
//! `u32::MAX`), then `[targets: u16]` and per target its configuration id and ARN as strings.
//! Every length is checked against the bytes that remain before anything is allocated.

use std::time::{Duration, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::Target;
use crate::bytes::Reader;
use crate::event::{Event, EventName};

/// What one frame holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Entry {
    pub seq: u64,
    /// When it was queued (milliseconds since the epoch), for the lag metric.
    pub queued_ms: u64,
    pub event: Event,
    pub targets: Vec<Target>,
}

/// The first byte of a version 1 entry.
const VERSION: u8 = 1;
/// Where the sequencer is: it is written last, under the queue's lock (`number`).
const SEQ_AT: usize = 1;
/// An absent optional string.
const ABSENT: u32 = u32::MAX;

/// The entry of `event` for `targets`, unnumbered (sequencer 0), after `prefix` (the frame's
/// header, left for the caller to fill).
pub fn encode(prefix: usize, queued_ms: u64, event: &Event, targets: &[Target]) -> Vec<u8> {
    let strings = [&event.bucket, &event.key, &event.principal, &event.source_ip, &event.region, &event.bucket_owner];
    let optional = [event.etag.as_ref(), event.version_id.as_ref()];
    let text: usize = strings.iter().map(|s| s.len()).sum::<usize>()
        + optional.iter().flatten().map(|s| s.len()).sum::<usize>()
        + targets.iter().map(|t| t.configuration_id.len() + t.arn.len()).sum::<usize>();
    let mut out = Vec::with_capacity(prefix + 48 + 4 * (8 + 2 * targets.len()) + text);
    out.resize(prefix, 0);
    out.push(VERSION);
    out.extend_from_slice(&0u64.to_le_bytes());
    out.extend_from_slice(&queued_ms.to_le_bytes());
    out.push(name_index(event.name));
    out.extend_from_slice(&event.size.to_le_bytes());
    let since = event.time.duration_since(UNIX_EPOCH).unwrap_or_default();
    out.extend_from_slice(&since.as_secs().to_le_bytes());
    out.extend_from_slice(&since.subsec_nanos().to_le_bytes());
    put(&mut out, Some(&event.bucket));
    put(&mut out, Some(&event.key));
    put(&mut out, event.etag.as_deref());
    put(&mut out, event.version_id.as_deref());
    for text in [&event.principal, &event.source_ip, &event.region, &event.bucket_owner] {
        put(&mut out, Some(text));
    }
    // At most MAX_DESTINATIONS (64) targets reach here: the queue checked each one's ARN.
    out.extend_from_slice(&(targets.len().min(u16::MAX as usize) as u16).to_le_bytes());
    for target in targets {
        put(&mut out, Some(&target.configuration_id));
        put(&mut out, Some(&target.arn));
    }
    out
}

/// Writes `seq` into the entry that starts at `entry[0]`.
pub fn number(entry: &mut [u8], seq: u64) {
    entry[SEQ_AT..SEQ_AT + 8].copy_from_slice(&seq.to_le_bytes());
}

fn put(out: &mut Vec<u8>, text: Option<&str>) {
    match text {
        // The frame's length is checked against MAX_FRAME (1 MiB) before it is written: a
        // longer string never reaches a segment.
        Some(text) => {
            out.extend_from_slice(&(text.len().min(ABSENT as usize - 1) as u32).to_le_bytes());
            out.extend_from_slice(text.as_bytes());
        }
        None => out.extend_from_slice(&ABSENT.to_le_bytes()),
    }
}

fn name_index(name: EventName) -> u8 {
    EventName::ALL.iter().position(|n| *n == name).expect("every name is in ALL") as u8
}

/// The entry in `payload`, binary or (written by an earlier version) JSON.
pub fn decode(payload: &[u8]) -> Option<Entry> {
    match payload.first()? {
        b'{' => serde_json::from_slice(payload).ok(),
        &VERSION => entry(Reader(&payload[1..])),
        _ => None,
    }
}

/// An optional string: its length (`ABSENT`: none) and its UTF-8.
fn optional(r: &mut Reader<'_>) -> Option<Option<String>> {
    match r.u32()? {
        ABSENT => Some(None),
        len => Some(Some(r.text(len as usize)?)),
    }
}

fn string(r: &mut Reader<'_>) -> Option<String> {
    optional(r)?
}

/// The entry after its version byte.
fn entry(mut r: Reader<'_>) -> Option<Entry> {
    let seq = r.u64()?;
    let queued_ms = r.u64()?;
    let name = *EventName::ALL.get(usize::from(r.u8()?))?;
    let size = r.u64()?;
    let (secs, nanos) = (r.u64()?, r.u32()?);
    let time = UNIX_EPOCH.checked_add(Duration::new(secs, nanos.min(999_999_999)))?;
    let bucket = string(&mut r)?;
    let key = string(&mut r)?;
    let etag = optional(&mut r)?;
    let version_id = optional(&mut r)?;
    let (principal, source_ip, region, bucket_owner) =
        (string(&mut r)?, string(&mut r)?, string(&mut r)?, string(&mut r)?);
    let count = r.u16()?;
    // Each target takes at least 8 bytes: a count past what remains is corruption.
    if usize::from(count) * 8 > r.0.len() {
        return None;
    }
    let mut targets = Vec::with_capacity(usize::from(count));
    for _ in 0..count {
        targets.push(Target { configuration_id: string(&mut r)?, arn: string(&mut r)? });
    }
    if !r.is_empty() {
        return None;
    }
    let event = Event { name, bucket, key, size, etag, version_id, principal, source_ip, time, region, bucket_owner };
    Some(Entry { seq, queued_ms, event, targets })
}
