//! Idempotency keys and hook delivery ids: each remembered from its first use for the
//! retention horizon (`INTERACTIONS_WAITING_RETENTION`), and with a data directory kept
//! in the store (`Space::Keys`), so a retry after a restart is still recognised.
//!
//! **An idempotency key is its subject's** ([`start_key`]): kept in the subject's slot,
//! written in the change that starts its run under that slot's owner, and read back
//! whenever the slot is (at an open, and when a node takes the slot), so the node that
//! serves a subject knows every key its runs were started under, whichever node started
//! them. The same key on another subject names another start. **A delivery id is the
//! runtime's** ([`hook_key`]): a hook fire visits subjects of any slot, so its id is
//! kept outside every slot's fencing, and a node that does not know an id reads the
//! store before it fires.
//!
//! A key is *pending* while the work it names is under way (a second use then is told
//! so), and *known* once that work is durable. An idempotency key is kept in the same
//! change that starts its run, so the two are durable together or not at all: a retry
//! finds the run or starts it, never a second one. A delivery id is kept once the fire
//! it names was made (a hook fire visits several subjects, so it cannot share one
//! change): a crash between the two lets the sender's retry fire again (at least once),
//! never drops a delivery that was not answered.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use dashmap::DashMap;
use dashmap::mapref::entry::Entry;
use serde::{Deserialize, Serialize};

/// What is kept of a key, in memory and in the store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Kept {
    /// The run an idempotency key started; none for a delivery id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) run: Option<String>,
    /// The request's fingerprint: a key used again for another request is refused.
    pub(crate) fingerprint: u64,
    /// When the key was first used; it is forgotten at this plus the retention horizon.
    pub(crate) at: DateTime<Utc>,
}

/// A key's place in the table.
#[derive(Debug, Clone)]
enum Slot {
    /// Its work is under way.
    Pending { fingerprint: u64 },
    /// Its work is done (and durable).
    Known(Kept),
}

/// What a use of a key finds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Claim {
    /// First use: the caller does the work, then [`Keys::settle`]s or [`Keys::release`]s.
    New,
    /// Used before for the same request: its work is done.
    Known(Kept),
    /// Used before for the same request, and its work is still under way.
    Busy,
    /// Used before for another request.
    Reused,
}

/// The table of keys in use, by name ([`start_key`], [`hook_key`], and the `run:<key>`
/// of idempotency keys kept before they were their subject's, [`legacy_run_key`]).
#[derive(Debug, Default)]
pub(crate) struct Keys {
    slots: DashMap<Arc<str>, Slot>,
}

impl Keys {
    /// Use `key` for a request of `fingerprint`.
    pub(crate) fn claim(&self, key: &str, fingerprint: u64) -> Claim {
        match self.slots.entry(Arc::from(key)) {
            Entry::Vacant(vacant) => {
                vacant.insert(Slot::Pending { fingerprint });
                Claim::New
            }
            Entry::Occupied(slot) => match slot.get() {
                Slot::Pending { fingerprint: f } if *f == fingerprint => Claim::Busy,
                Slot::Known(kept) if kept.fingerprint == fingerprint => Claim::Known(kept.clone()),
                _ => Claim::Reused,
            },
        }
    }

    /// What `key` names, if its work is done.
    pub(crate) fn known(&self, key: &str) -> Option<Kept> {
        match self.slots.get(key).as_deref() {
            Some(Slot::Known(kept)) => Some(kept.clone()),
            _ => None,
        }
    }

    /// The work of `key` is durable.
    pub(crate) fn settle(&self, key: &str, kept: Kept) {
        self.slots.insert(Arc::from(key), Slot::Known(kept));
    }

    /// The work of a pending `key` failed or was refused: the key is free again.
    pub(crate) fn release(&self, key: &str) {
        self.slots
            .remove_if(key, |_, slot| matches!(slot, Slot::Pending { .. }));
    }

    /// Forget a known `key` (its horizon passed); whether it was known.
    pub(crate) fn forget(&self, key: &str) -> bool {
        self.slots
            .remove_if(key, |_, slot| matches!(slot, Slot::Known(_)))
            .is_some()
    }

    /// How many keys are in use.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }
}

/// A request's fingerprint: XXH3 over its parts, each preceded by its length, so no two
/// different lists of parts run together into the same bytes.
pub(crate) fn fingerprint(parts: &[&[u8]]) -> u64 {
    let mut hasher = xxhash_rust::xxh3::Xxh3::new();
    for part in parts {
        hasher.update(&(part.len() as u64).to_be_bytes());
        hasher.update(part);
    }
    hasher.digest()
}

/// The name of the idempotency key `key` of a start on `subject`, in the table and the
/// store: `start:`, the subject's length in bytes, its name, then the key, so no two
/// pairs make the same name and the subject is read back from it ([`subject_of`]).
pub(crate) fn start_key(subject: &str, key: &str) -> String {
    format!("start:{}:{subject}:{key}", subject.len())
}

/// The subject whose slot keeps the key named `name`: a [`start_key`]'s subject; `None`
/// for a name of the runtime's (a delivery id, or a key kept before keys were their
/// subject's).
pub(crate) fn subject_of(name: &str) -> Option<&str> {
    let rest = name.strip_prefix("start:")?;
    let (len, rest) = rest.split_once(':')?;
    let len: usize = len.parse().ok()?;
    let subject = rest.get(..len)?;
    rest.get(len..)?.starts_with(':').then_some(subject)
}

/// The name an idempotency key had before keys were their subject's (one name for the
/// whole runtime): such a key, read back, still answers the same start until its
/// horizon.
pub(crate) fn legacy_run_key(key: &str) -> String {
    format!("run:{key}")
}

/// The name of a hook delivery in the table and the store.
pub(crate) fn hook_key(topic: &str, delivery: &str) -> String {
    format!("hook:{}:{topic}:{delivery}", topic.len())
}

/// The longest idempotency key or delivery id taken, in bytes.
pub const MAX_KEY_BYTES: usize = 255;

/// What is wrong with `key` as an idempotency key or delivery id, if anything.
pub(crate) fn problem(key: &str) -> Option<String> {
    if key.is_empty() {
        Some("empty".to_owned())
    } else if key.len() > MAX_KEY_BYTES {
        Some(format!(
            "{} bytes long, more than {MAX_KEY_BYTES}",
            key.len()
        ))
    } else {
        None
    }
}

/// Why a hook delivery was not fired.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DeliveryError {
    /// The delivery was fired before, within the retention horizon.
    #[error("delivery already seen at {}", crate::error::rfc3339(at))]
    AlreadySeen {
        /// When it was first fired.
        at: DateTime<Utc>,
    },
    /// The same delivery is being fired now.
    #[error("the same delivery is being fired now")]
    InProgress,
    /// The delivery id was used before with another input.
    #[error("the delivery id was used before with another input")]
    Reused,
    /// The delivery id is empty or too long.
    #[error("the delivery id is {why}")]
    InvalidId {
        /// What is wrong with it.
        why: String,
    },
}

impl DeliveryError {
    /// Whether `id` may be a delivery id: 1 to [`MAX_KEY_BYTES`] bytes; else why not (a
    /// front end that takes the id in several places checks each with this).
    pub fn check_id(id: &str) -> Result<(), DeliveryError> {
        match problem(id) {
            None => Ok(()),
            Some(why) => Err(DeliveryError::InvalidId { why }),
        }
    }

    /// The error's stable kind.
    pub fn kind(&self) -> &'static str {
        match self {
            DeliveryError::AlreadySeen { .. } => "already_seen",
            DeliveryError::InProgress => "in_progress",
            DeliveryError::Reused => "delivery_id_reused",
            DeliveryError::InvalidId { .. } => "invalid_delivery_id",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(run: &str, fingerprint: u64) -> Kept {
        Kept {
            run: Some(run.to_owned()),
            fingerprint,
            at: DateTime::<Utc>::UNIX_EPOCH,
        }
    }

    #[test]
    fn a_key_is_new_then_busy_then_known_and_another_request_is_refused() {
        let keys = Keys::default();
        assert_eq!(keys.claim("run:a", 1), Claim::New);
        assert_eq!(keys.claim("run:a", 1), Claim::Busy);
        assert_eq!(keys.claim("run:a", 2), Claim::Reused);
        keys.settle("run:a", kept("r-1", 1));
        assert_eq!(keys.claim("run:a", 1), Claim::Known(kept("r-1", 1)));
        assert_eq!(keys.claim("run:a", 2), Claim::Reused);
        assert!(!keys.forget("run:b"));
        assert!(keys.forget("run:a"));
        assert_eq!(keys.claim("run:a", 2), Claim::New);
        keys.release("run:a");
        assert_eq!(keys.len(), 0);
    }

    #[test]
    fn fingerprints_keep_parts_apart() {
        assert_ne!(fingerprint(&[b"ab", b"c"]), fingerprint(&[b"a", b"bc"]));
        assert_eq!(fingerprint(&[b"ab", b"c"]), fingerprint(&[b"ab", b"c"]));
        assert_ne!(hook_key("a:b", "c"), hook_key("a", "b:c"));
        assert_ne!(start_key("a:b", "c"), start_key("a", "b:c"));
    }

    #[test]
    fn a_start_key_names_its_subject() {
        for (subject, key) in [("thread-7", "k"), ("a:b", "c:d"), ("", "k"), ("é:", ":")] {
            assert_eq!(subject_of(&start_key(subject, key)), Some(subject));
        }
        assert_eq!(subject_of(&legacy_run_key("start:1:a:k")), None);
        assert_eq!(subject_of(&hook_key("start", "d")), None);
        for damaged in [
            "start:",
            "start:x:a:k",
            "start:9:a:k",
            "start:1:ab",
            "start:1:é:k",
        ] {
            assert_eq!(subject_of(damaged), None, "{damaged}");
        }
    }
}
