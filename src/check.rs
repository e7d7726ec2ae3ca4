//! Reading a data directory whole to find damage, before it is served: what `parkway
//! check` runs.
//!
//! [`check`] opens the directory without changing it (`docs/durability.md`, "Checking a
//! data directory"), reads every key of every keyspace in key order, looks each key up
//! again as the runtime would (through the table's filter and index), and decodes each
//! value as the runtime reads it back. It reports what it read and every damage found,
//! each naming the keyspace and where: the key, or, for a block that cannot be read at
//! all (its keys are lost with it), the keys read on either side of it. It is the `disk`
//! feature's: a build without the disk store has no `check`.
//!
//! ```no_run
//! let report = parkway::check::check(std::path::Path::new("/var/lib/parkway")).unwrap();
//! for space in &report.keyspaces {
//!     println!("{}: {} keys, {} damaged", space.name, space.keys, space.damage.len());
//! }
//! assert!(report.is_clean());
//! ```

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::health::shown_key;
use crate::store::{FORMAT_VERSION, OpenError, Reader, Space, StoreError, UPGRADES_FROM};

/// How many times in a row a read may fail with no key read between before the walk of a
/// keyspace stops: the engine could not step over the damage (a damaged index), and the
/// rest of the keyspace is reported as not read.
const FAILURES_IN_A_ROW: usize = 16;

/// Damage listed per keyspace; more is counted, not listed.
const LISTED: usize = 100;

/// What a check of a data directory found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Report {
    /// The directory checked.
    pub dir: PathBuf,
    /// Its format version as written (`None`: none is).
    pub format_version: Option<String>,
    /// Whether the values were decoded (only a directory of this build's version is:
    /// an older one is upgraded when a runtime opens it).
    pub decoded: bool,
    /// Damage in the journals (what a runtime's open refuses: the journal, the offset
    /// and what would be lost), if any; the keyspaces are then read as they stand
    /// before it.
    pub journal: Option<String>,
    /// Each keyspace, in the store's order.
    pub keyspaces: Vec<Keyspace>,
}

impl Report {
    /// Whether no damage was found.
    pub fn is_clean(&self) -> bool {
        self.journal.is_none() && self.keyspaces.iter().all(|k| k.damage_found == 0)
    }

    /// Damage found in the journals (one at most: the first, where an open stops) and
    /// in every keyspace.
    pub fn damage_found(&self) -> u64 {
        u64::from(self.journal.is_some())
            + self.keyspaces.iter().map(|k| k.damage_found).sum::<u64>()
    }

    /// Keys read in every keyspace.
    pub fn keys(&self) -> u64 {
        self.keyspaces.iter().map(|k| k.keys).sum()
    }
}

/// What was read of one keyspace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Keyspace {
    /// Its name on disk (`subjects.4`, `records.4`, …; a directory not yet converted to
    /// format version 4 is read under its older names, `subjects`, …).
    pub name: String,
    /// The folder of its tables, under the directory's `data/`; `None` if the directory
    /// has no such keyspace.
    pub folder: Option<PathBuf>,
    /// Keys read.
    pub keys: u64,
    /// Bytes of keys and values read.
    pub bytes: u64,
    /// Damage found (all of it, listed or not).
    pub damage_found: u64,
    /// The damage found, the first 100 of it (the rest is counted in `damage_found`).
    pub damage: Vec<Damage>,
}

/// One damage found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Damage {
    /// The keyspace, by its name on disk.
    pub keyspace: String,
    /// The key whose lookup or value is damaged, as text (a subject's part as
    /// `subject/id`); `None` for a block that cannot be read, whose keys are unknown.
    pub key: Option<String>,
    /// For a block that cannot be read: the last key read before it (`None`: it is at
    /// the keyspace's start).
    pub after: Option<String>,
    /// For a block that cannot be read: the first key read after it (`None`: it is at
    /// the keyspace's end, or the walk stopped).
    pub before: Option<String>,
    /// What was found.
    pub detail: String,
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "keyspace {}", self.keyspace)?;
        match (&self.key, &self.after, &self.before) {
            (Some(key), _, _) => write!(f, " at key {key:?}")?,
            (None, None, None) => f.write_str(" (a block whose keys are unknown)")?,
            (None, after, before) => {
                f.write_str(" between ")?;
                match after {
                    Some(after) => write!(f, "key {after:?}")?,
                    None => f.write_str("its start")?,
                }
                f.write_str(" and ")?;
                match before {
                    Some(before) => write!(f, "key {before:?}")?,
                    None => f.write_str("its end")?,
                }
            }
        }
        write!(f, ": {}", self.detail)
    }
}

/// Why a directory could not be checked; nothing in it was changed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CheckError {
    /// The directory is missing, holds no store, is held by a running server, or the
    /// engine refused to open it.
    #[error("{0}")]
    Open(String),
    /// The directory's format version is not one this build reads.
    #[error(
        "store directory {dir} has format version {found}, this build reads version \
         {FORMAT_VERSION} (and the older ones from version {UPGRADES_FROM})"
    )]
    Version {
        /// The directory.
        dir: PathBuf,
        /// The version found, as written.
        found: String,
    },
}

/// Reads every key of the data directory `dir`, changing nothing in it, and reports what
/// it read and the damage found. A directory held by a running runtime is refused (its
/// lock is taken while the check reads, so none opens it meanwhile).
pub fn check(dir: &Path) -> Result<Report, CheckError> {
    let reader = Reader::open(dir).map_err(|e: OpenError| CheckError::Open(e.to_string()))?;
    // A version that cannot be read is reported with the meta keyspace's damage, below.
    let format_version: Option<String> = reader.version().unwrap_or_default();
    if let Some(found) = &format_version {
        let known = found
            .parse::<u32>()
            .is_ok_and(|v| (UPGRADES_FROM..=FORMAT_VERSION).contains(&v));
        if !known {
            return Err(CheckError::Version {
                dir: dir.to_path_buf(),
                found: found.clone(),
            });
        }
    }
    let current = FORMAT_VERSION.to_string();
    let decoded = format_version.as_deref() == Some(current.as_str());
    let keyspaces = Space::ALL
        .iter()
        .map(|&space| check_space(&reader, space, decoded))
        .collect();
    Ok(Report {
        dir: dir.to_path_buf(),
        format_version,
        decoded,
        journal: reader.journal_damage().map(str::to_owned),
        keyspaces,
    })
}

/// Reads `space` whole: every key, looked up again, each value decoded if `decode`.
fn check_space(reader: &Reader, space: Space, decode: bool) -> Keyspace {
    let name = reader.name(space);
    let mut found = Keyspace {
        name: name.to_owned(),
        folder: reader.folder(space),
        keys: 0,
        bytes: 0,
        damage_found: 0,
        damage: Vec::new(),
    };
    if !reader.has(space) {
        return found;
    }
    let shown = |key: &[u8]| shown_key(name, key);
    // The last key read, and the unreadable blocks met since it (their `before` is the
    // next key read).
    let mut last: Option<Vec<u8>> = None;
    let mut open_blocks: Vec<usize> = Vec::new();
    let mut in_a_row = 0;
    let mut damage: Vec<Damage> = Vec::new();
    let mut count = 0u64;
    reader.walk(space, &mut |read| match read {
        Ok((key, value)) => {
            in_a_row = 0;
            found.keys += 1;
            found.bytes += (key.len() + value.len()) as u64;
            for &at in &open_blocks {
                if let Some(d) = damage.get_mut(at) {
                    d.before = Some(shown(key));
                }
            }
            open_blocks.clear();
            let mut note = |detail: String| {
                count += 1;
                if damage.len() < LISTED {
                    damage.push(Damage {
                        keyspace: name.to_owned(),
                        key: Some(shown(key)),
                        after: None,
                        before: None,
                        detail,
                    });
                }
            };
            match reader.get(space, key) {
                Ok(Some(looked_up)) if looked_up == value => {}
                Ok(Some(_)) => note("a lookup of the key reads another value than the walk".into()),
                Ok(None) => note("a lookup of the key does not find it".into()),
                Err(err) => note(format!("a lookup of the key fails: {}", detail_of(&err))),
            }
            if decode && let Err(problem) = crate::subject::decode::check(space, key, value) {
                note(format!("the value is not the runtime's: {problem}"));
            }
            last = Some(key.to_vec());
            true
        }
        Err(err) => {
            // Failures with no key read between are one damaged block, met again.
            in_a_row += 1;
            if in_a_row == 1 {
                count += 1;
                if damage.len() < LISTED {
                    open_blocks.push(damage.len());
                    damage.push(Damage {
                        keyspace: name.to_owned(),
                        key: None,
                        after: last.as_deref().map(shown),
                        before: None,
                        detail: detail_of(&err),
                    });
                }
            }
            if in_a_row < FAILURES_IN_A_ROW {
                return true;
            }
            if let Some(d) = open_blocks.last().and_then(|&at| damage.get_mut(at)) {
                d.detail.push_str(
                    "; the walk cannot step past it, so the rest of the keyspace is not read",
                );
            }
            false
        }
    });
    found.damage_found = count;
    found.damage = damage;
    found
}

/// What a failed read says, without the directory (the report names it once).
fn detail_of(err: &StoreError) -> String {
    match err {
        StoreError::Corrupt { detail, .. } => detail.clone(),
        StoreError::Read { cause, .. } => format!("the read failed: {cause}"),
        other => other.to_string(),
    }
}
