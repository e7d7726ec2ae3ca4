//! Tells a torn journal tail from damage before it, before the engine replays the journals.
//!
//! fjall replays its journals (`data/<n>.jnl`, oldest first) in a "tolerate a corrupt
//! tail" mode, and its reader takes the first entry it cannot decode (a bad tag, a bad
//! trailer, a batch start inside a batch) for the end of the journal: it truncates the
//! file there and replays what came before, silently. A few bytes damaged in the middle
//! of a journal thus dropped every batch after them, acknowledged or not. So the disk
//! engine reads every journal itself first, in fjall's format, and finds where the whole
//! batches end (the *cut*). What follows the cut decides:
//!
//! - nothing (zeros, which fjall preallocates, or the end of the file, in every journal
//!   from there on): the journal ends cleanly;
//! - a prefix of one batch running into zeros or the end of the newest journal, and
//!   nothing after: a **torn tail**, the last batch a kill cut short while it was written;
//! - anything else (a batch that decodes whole but fails its checksum or breaks the order
//!   of sequence numbers, bytes that are no batch's prefix, a whole batch or any byte in a
//!   later journal): **damage**, which the disk engine refuses unless told to cut there.
//!
//! The format, as fjall 3 writes it (`fjall::journal::entry`), little-endian: a batch is a
//! start (tag 1, item count u32, sequence number u64), its items (tag 2, value type u8,
//! compression u8, keyspace u64, key length u16, value length u32, stored length u32, the
//! key, the stored value), and an end (tag 3, the xxh3 of the items' bytes u64, the
//! trailer `FJL\x03`). A clear (tag 4, keyspace u64) counts as an item. Sequence numbers
//! rise from batch to batch, across the files. This module does not read what the items
//! mean; the store's own check of what was acknowledged (the mark) is the disk engine's.

use std::hash::Hasher;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The trailer that closes every batch's end marker.
const TRAILER: &[u8; 4] = b"FJL\x03";

/// Bytes read at a time while a journal is loaded.
const CHUNK: usize = 1 << 20;

/// A journal file in the engine's folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Journal {
    /// Its number, `<n>.jnl`.
    pub(super) number: u64,
    /// Its path.
    pub(super) path: PathBuf,
}

/// What the journals hold, as the scan found them.
#[derive(Debug, Default)]
pub(super) struct Scan {
    /// Whole batches before the cut (or in all, if there is none).
    pub(super) batches: u64,
    /// The sequence number of the last of them.
    pub(super) last_seqno: Option<u64>,
    /// Where the whole batches end, if anything but zeros follows.
    pub(super) cut: Option<Cut>,
    /// Where the whole batches end when nothing follows: the newest journal that holds a
    /// batch, and the offset after its last one.
    pub(super) end: Option<(PathBuf, u64)>,
}

/// Where the whole batches end and something follows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Cut {
    /// The journal file holding it.
    pub(super) path: PathBuf,
    /// The offset in that file where the last whole batch before it ends.
    pub(super) offset: u64,
    /// What is wrong at the offset.
    pub(super) reason: String,
    /// Whether it is a torn tail (see the module's text) rather than damage.
    pub(super) torn: bool,
    /// The sequence number of the batch at the cut, if its start marker reads.
    pub(super) seqno: Option<u64>,
    /// Whole, valid batches found after the cut, in that file and the later ones.
    pub(super) batches_after: u64,
    /// Bytes from the cut to the last byte that is not zero, in that file and the later
    /// ones: what cutting there drops.
    pub(super) bytes_after: u64,
    /// The journals after the one cut, which cutting there drops whole.
    pub(super) later: Vec<Journal>,
}

/// The journal files in the engine's folder, oldest first.
pub(super) fn journals(folder: &Path) -> std::io::Result<Vec<Journal>> {
    let mut found = Vec::new();
    let entries = match std::fs::read_dir(folder) {
        Ok(entries) => entries,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(found),
        Err(err) => return Err(err),
    };
    for entry in entries {
        let entry = entry?;
        let number = entry
            .file_name()
            .to_str()
            .and_then(|name| name.strip_suffix(".jnl")?.parse::<u64>().ok());
        if let Some(number) = number {
            found.push(Journal {
                number,
                path: entry.path(),
            });
        }
    }
    found.sort_by_key(|journal| journal.number);
    Ok(found)
}

/// Reads the journals of the engine in `folder` and finds where their whole batches end.
pub(super) fn scan(folder: &Path) -> std::io::Result<Scan> {
    let journals = journals(folder)?;
    let mut scan = Scan::default();
    for (at, journal) in journals.iter().enumerate() {
        let bytes = load(&journal.path)?;
        let mut offset = 0;
        let stop = loop {
            match batch_at(&bytes, offset, scan.last_seqno) {
                Ok(batch) => {
                    scan.batches += 1;
                    scan.last_seqno = Some(batch.seqno);
                    offset = batch.end;
                    scan.end = Some((journal.path.clone(), offset as u64));
                }
                Err(stop) => break stop,
            }
        };
        let data_end = data_end_of(&bytes);
        if data_end <= offset {
            // Only zeros follow: this journal ends cleanly.
            continue;
        }
        let later = &journals[at + 1..];
        let mut batches_after = resync(&bytes, offset + 1, scan.last_seqno);
        let mut bytes_after = (data_end - offset) as u64;
        for journal in later {
            let bytes = load(&journal.path)?;
            batches_after += resync(&bytes, 0, scan.last_seqno);
            bytes_after += data_end_of(&bytes) as u64;
        }
        let nothing_later = batches_after == 0 && bytes_after == (data_end - offset) as u64;
        let torn = nothing_later && stop.reaches > data_end && !stop.whole;
        scan.cut = Some(Cut {
            path: journal.path.clone(),
            offset: offset as u64,
            reason: stop.reason,
            torn,
            seqno: stop.seqno,
            batches_after,
            bytes_after,
            later: later.to_vec(),
        });
        return Ok(scan);
    }
    Ok(scan)
}

/// What a refusal says would be dropped, and how to drop it.
pub(super) fn dropped(
    batches: u64,
    bytes: u64,
    later: usize,
    last_acknowledged: Option<&std::ops::RangeInclusive<u64>>,
    acknowledged_lost: bool,
) -> String {
    let mut text = format!(
        "opening would drop the batch there and {batches} whole batch{} after it ({bytes} bytes",
        if batches == 1 { "" } else { "es" }
    );
    if later > 0 {
        text.push_str(&format!(
            ", with {later} later journal file{}",
            if later == 1 { "" } else { "s" }
        ));
    }
    text.push(')');
    let numbered = |span: &std::ops::RangeInclusive<u64>| {
        if span.start() == span.end() {
            format!("sequence number {}", span.start())
        } else {
            format!("sequence number {} to {}", span.start(), span.end())
        }
    };
    text.push_str(&match (last_acknowledged, acknowledged_lost) {
        (Some(span), true) => {
            format!(
                ", the last acknowledged group ({}) among them",
                numbered(span)
            )
        }
        (Some(span), false) => format!(
            ", none of them acknowledged as far as the mark tells (the last acknowledged \
             group, {}, is before the damage)",
            numbered(span)
        ),
        (None, _) => ", which may hold acknowledged work (the directory has no mark of the \
                       last acknowledged group)"
            .to_owned(),
    });
    text.push_str(
        "; to cut the journal there and open without them, open with the option to truncate \
         a damaged journal (`parkway serve --truncate-damaged-journal`)",
    );
    text
}

/// The contents of a journal up to its last chunk that is not all zeros (the rest of the
/// file, preallocated, reads as zeros): a 64 MiB journal that holds little costs little.
pub(super) fn load(path: &Path) -> std::io::Result<Vec<u8>> {
    let mut file = std::fs::File::open(path)?;
    let mut bytes = Vec::new();
    let mut zeros = 0usize;
    let mut chunk = vec![0u8; CHUNK];
    // Compared whole (a `memcmp`): most of a preallocated journal is zeros.
    let none = vec![0u8; CHUNK];
    loop {
        let mut filled = 0;
        while filled < CHUNK {
            match file.read(&mut chunk[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
                Err(err) => return Err(err),
            }
        }
        if filled == 0 {
            return Ok(bytes);
        }
        if chunk[..filled] == none[..filled] {
            zeros += filled;
        } else {
            bytes.resize(bytes.len() + zeros, 0);
            zeros = 0;
            bytes.extend_from_slice(&chunk[..filled]);
        }
    }
}

/// Where the bytes that are not zero end (0 if there are none).
pub(super) fn data_end_of(bytes: &[u8]) -> usize {
    bytes.iter().rposition(|b| *b != 0).map_or(0, |i| i + 1)
}

/// A whole, valid batch.
struct Whole {
    /// Its sequence number.
    seqno: u64,
    /// The offset after its end marker.
    end: usize,
}

/// Why the bytes at an offset are not a whole, valid batch.
struct Stop {
    /// What is wrong, for the operator.
    reason: String,
    /// How far the reading went: past the data's end, the batch may have been torn.
    reaches: usize,
    /// Whether every byte of the batch was there (an end marker was read whole): a whole
    /// batch that fails its checksum or its order is damage, never a torn tail.
    whole: bool,
    /// Its sequence number, if its start marker reads.
    seqno: Option<u64>,
}

/// A reader over a journal's loaded bytes that never reads past them.
struct Cursor<'a> {
    /// The bytes.
    bytes: &'a [u8],
    /// Where the next read starts.
    at: usize,
}

impl Cursor<'_> {
    /// `n` bytes, or `None` past the end of the loaded bytes (zeros or the file's end:
    /// either way nothing was written there).
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let end = self.at.checked_add(n)?;
        let taken = self.bytes.get(self.at..end)?;
        self.at = end;
        Some(taken)
    }

    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_le_bytes([b[0], b[1]]))
    }

    fn u32(&mut self) -> Option<u32> {
        self.take(4)
            .and_then(|b| b.try_into().ok())
            .map(u32::from_le_bytes)
    }

    fn u64(&mut self) -> Option<u64> {
        self.take(8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes)
    }
}

/// The whole, valid batch at `offset`, whose sequence number must follow `after`; or why
/// there is none.
fn batch_at(bytes: &[u8], offset: usize, after: Option<u64>) -> Result<Whole, Stop> {
    let mut cursor = Cursor { bytes, at: offset };
    // Past the loaded bytes: the reading ran into zeros or the end of the file.
    let short = |cursor: &Cursor<'_>, seqno, what: &str| Stop {
        reason: format!("{what} is cut short"),
        reaches: bytes.len().max(cursor.at) + 1,
        whole: false,
        seqno,
    };
    let bad = |cursor: &Cursor<'_>, seqno, reason: String| Stop {
        reason,
        reaches: cursor.at,
        whole: false,
        seqno,
    };
    let Some(tag) = cursor.u8() else {
        return Err(short(&cursor, None, "the journal"));
    };
    if tag != 1 {
        return Err(bad(
            &cursor,
            None,
            format!("a batch should start here, found tag {tag}"),
        ));
    }
    let (Some(count), Some(number)) = (cursor.u32(), cursor.u64()) else {
        return Err(short(&cursor, None, "the batch's start marker"));
    };
    let seqno = Some(number);
    let mut hasher = xxhash_rust::xxh3::Xxh3::new();
    for item in 0..count {
        let start = cursor.at;
        let Some(tag) = cursor.u8() else {
            return Err(short(&cursor, seqno, "the batch"));
        };
        match tag {
            2 => {
                let header = (
                    cursor.u8(),
                    cursor.u8(),
                    cursor.u64(),
                    cursor.u16(),
                    cursor.u32(),
                    cursor.u32(),
                );
                let (Some(kind), Some(compression), Some(_), Some(key), Some(len), Some(stored)) =
                    header
                else {
                    return Err(short(&cursor, seqno, "an item's header"));
                };
                if !matches!(kind, 0..=2) {
                    return Err(bad(
                        &cursor,
                        seqno,
                        format!("item {item} has value type {kind}"),
                    ));
                }
                let plausible = match compression {
                    0 => len == stored,
                    1 => u64::from(len) <= u64::from(stored).saturating_mul(255) + 16,
                    _ => false,
                };
                if !plausible {
                    return Err(bad(
                        &cursor,
                        seqno,
                        format!(
                            "item {item} has compression {compression}, length {len} stored in {stored}"
                        ),
                    ));
                }
                if cursor.take(usize::from(key) + stored as usize).is_none() {
                    // Its lengths reach past the written bytes: torn, or damaged lengths.
                    return Err(Stop {
                        reason: format!("item {item} reaches past the written bytes"),
                        reaches: cursor
                            .at
                            .saturating_add(usize::from(key))
                            .saturating_add(stored as usize),
                        whole: false,
                        seqno,
                    });
                }
            }
            4 => {
                if cursor.u64().is_none() {
                    return Err(short(&cursor, seqno, "a clear marker"));
                }
            }
            other => {
                return Err(bad(
                    &cursor,
                    seqno,
                    format!("item {item} of {count} should follow, found tag {other}"),
                ));
            }
        }
        hasher.update(&bytes[start..cursor.at]);
    }
    let Some(tag) = cursor.u8() else {
        return Err(short(&cursor, seqno, "the batch"));
    };
    if tag != 3 {
        return Err(bad(
            &cursor,
            seqno,
            format!("the end of a batch of {count} items should follow, found tag {tag}"),
        ));
    }
    let (Some(checksum), Some(trailer)) = (cursor.u64(), cursor.take(TRAILER.len())) else {
        return Err(short(&cursor, seqno, "the batch's end marker"));
    };
    if trailer != TRAILER {
        return Err(bad(
            &cursor,
            seqno,
            "the batch's end marker has no trailer".to_owned(),
        ));
    }
    let whole = |reason: String| Stop {
        reason,
        reaches: cursor.at,
        whole: true,
        seqno,
    };
    if hasher.finish() != checksum {
        return Err(whole(format!("batch {number} fails its checksum")));
    }
    // The engine keeps the top bit of its numbers for itself: one at or past it, read
    // from a journal, would stop the engine at its next write.
    if number >= 1 << 63 {
        return Err(whole(format!(
            "batch {number} is numbered beyond the engine's range (below 2^63)"
        )));
    }
    if let Some(after) = after
        && number <= after
    {
        return Err(whole(format!(
            "batch {number} does not follow batch {after} (sequence numbers rise)"
        )));
    }
    Ok(Whole {
        seqno: number,
        end: cursor.at,
    })
}

/// How many whole, valid batches start at or after `from`, found by trying every offset
/// that holds a start tag and stepping over each batch found. Their sequence numbers must
/// follow `after` and each other, so a stray byte that happens to decode is not counted.
fn resync(bytes: &[u8], from: usize, after: Option<u64>) -> u64 {
    let mut found = 0;
    let mut last = after;
    let mut at = from;
    while at < bytes.len() {
        if bytes[at] == 1
            && let Ok(batch) = batch_at(bytes, at, last)
        {
            found += 1;
            last = Some(batch.seqno);
            at = batch.end;
            continue;
        }
        at += 1;
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A batch as fjall writes it: `items` puts of (key, value) into keyspace 1.
    fn batch(seqno: u64, items: &[(&[u8], &[u8])]) -> Vec<u8> {
        let mut out = vec![1];
        out.extend((items.len() as u32).to_le_bytes());
        out.extend(seqno.to_le_bytes());
        let mut hasher = xxhash_rust::xxh3::Xxh3::new();
        for (key, value) in items {
            let mut item = vec![2, 0, 0];
            item.extend(1u64.to_le_bytes());
            item.extend((key.len() as u16).to_le_bytes());
            item.extend((value.len() as u32).to_le_bytes());
            item.extend((value.len() as u32).to_le_bytes());
            item.extend(*key);
            item.extend(*value);
            hasher.update(&item);
            out.extend(item);
        }
        out.push(3);
        out.extend(hasher.finish().to_le_bytes());
        out.extend(TRAILER);
        out
    }

    /// Three batches, then zeros as fjall preallocates them.
    fn journal() -> (Vec<u8>, Vec<usize>) {
        let mut bytes = Vec::new();
        let mut ends = Vec::new();
        for n in 0..3u64 {
            bytes.extend(batch(
                10 + n,
                &[(b"key", format!("value {n}").as_bytes()), (b"k2", b"v")],
            ));
            ends.push(bytes.len());
        }
        (bytes, ends)
    }

    fn scan_of(bytes: &[u8], zeros: usize) -> Scan {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let mut file = bytes.to_vec();
        file.resize(bytes.len() + zeros, 0);
        std::fs::write(dir.path().join("7.jnl"), &file).expect("writes");
        scan(dir.path()).expect("scans")
    }

    #[test]
    fn whole_batches_then_zeros_end_cleanly() {
        let (bytes, ends) = journal();
        let scan = scan_of(&bytes, 4096);
        assert_eq!(scan.batches, 3);
        assert_eq!(scan.last_seqno, Some(12));
        assert!(scan.cut.is_none(), "{:?}", scan.cut);
        assert_eq!(scan.end.map(|(_, end)| end), Some(ends[2] as u64));
    }

    /// Every prefix of the last batch, followed by zeros or by the end of the file, is a
    /// torn tail cut where the second batch ends.
    #[test]
    fn every_prefix_of_the_last_batch_is_a_torn_tail() {
        let (bytes, ends) = journal();
        for len in ends[1] + 1..ends[2] {
            for zeros in [0, 100] {
                let scan = scan_of(&bytes[..len], zeros);
                let cut = scan.cut.expect("a cut");
                assert!(cut.torn, "prefix of {len} bytes: {}", cut.reason);
                assert_eq!(cut.offset, ends[1] as u64);
                assert_eq!(cut.batches_after, 0);
                assert_eq!(scan.batches, 2);
            }
        }
    }

    /// Any byte changed before the last batch is damage, and the batches after it are
    /// found and counted; changed in the last batch, it is damage or a torn tail, never
    /// a clean end.
    #[test]
    fn a_changed_byte_is_never_a_clean_end() {
        let (bytes, ends) = journal();
        for at in 0..ends[2] {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x5a;
            let scan = scan_of(&damaged, 100);
            let in_batch = ends.iter().position(|end| at < *end).expect("in a batch");
            let Some(cut) = scan.cut else {
                // A sequence number changed in a way that keeps the order: every item
                // is intact, and so is every batch.
                assert_eq!(scan.batches, 3, "byte {at}");
                continue;
            };
            let batch_start = if in_batch == 0 { 0 } else { ends[in_batch - 1] };
            // A changed sequence number is seen where it breaks the order: at its batch,
            // or at the next one.
            let in_seqno = (batch_start + 5..batch_start + 13).contains(&at);
            assert!(
                cut.offset == batch_start as u64
                    || (in_seqno && cut.offset == ends[in_batch] as u64),
                "byte {at}: cut at {}",
                cut.offset
            );
            if in_batch < 2 {
                assert!(!cut.torn, "byte {at}: {}", cut.reason);
                // The batches after the damaged one are found, unless the damaged
                // sequence number makes them look out of order.
                assert!(cut.batches_after <= (2 - in_batch) as u64, "byte {at}");
            }
        }
    }

    #[test]
    fn a_later_journal_with_data_makes_a_cut_damage() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let (bytes, ends) = journal();
        std::fs::write(dir.path().join("1.jnl"), &bytes[..ends[2] - 3]).expect("writes");
        std::fs::write(dir.path().join("2.jnl"), batch(20, &[(b"a", b"b")])).expect("writes");
        let scan = scan(dir.path()).expect("scans");
        let cut = scan.cut.expect("a cut");
        assert!(!cut.torn);
        assert_eq!(cut.batches_after, 1);
        assert_eq!(cut.later.len(), 1);
        assert_eq!(cut.later[0].number, 2);
    }

    #[test]
    fn no_journal_is_nothing_to_cut() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let scan = scan(dir.path()).expect("scans");
        assert_eq!(scan.batches, 0);
        assert!(scan.cut.is_none());
    }
}
