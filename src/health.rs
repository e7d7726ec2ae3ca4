//! Whether the runtime has met damage in its data directory: [`Health`], what
//! [`Runtime::health`](crate::Runtime::health) reports, and `Damage`, the tally the
//! services keep.
//!
//! A read that meets damage fails its operation with a [`StoreFault`] and is tallied
//! here once, with a `tracing` error naming the keyspace and the key. The runtime goes
//! on serving what it can read (`docs/durability.md`, "Damage met while serving"); the
//! tally never goes back to healthy while the runtime lives. This module decides
//! nothing about what a damaged subject may do: that is the registry's.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::StoreFault;
use crate::store::{Space, StoreError, key_text, layout};

/// Whether the runtime has met damage in its data directory since it was built.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Health {
    /// Reads that met damage (each failed its operation with [`StoreFault::Corrupt`]).
    pub damaged_reads: u64,
    /// The first damage met, naming its keyspace and key.
    pub first_damage: Option<StoreFault>,
}

impl Health {
    /// Whether no damage was met.
    pub fn is_healthy(&self) -> bool {
        self.damaged_reads == 0
    }
}

/// The damage met so far.
#[derive(Debug, Default)]
pub(crate) struct Damage {
    /// Reads that met damage.
    count: AtomicU64,
    /// The first of them.
    first: Mutex<Option<StoreFault>>,
}

impl Damage {
    /// A failed read as the operation that needed it reports it, tallied (and logged) if
    /// it met damage; `None` when the store stopped after a failed write or sync (the
    /// runtime then stops: the operation is told so).
    pub(crate) fn read_failed(&self, err: &StoreError) -> Option<StoreFault> {
        let fault = fault_of(err)?;
        self.met(&fault);
        Some(fault)
    }

    /// Tally `fault` if it is damage, and log it.
    pub(crate) fn met(&self, fault: &StoreFault) {
        match fault {
            StoreFault::Corrupt {
                keyspace,
                key,
                detail,
            } => {
                tracing::error!(
                    keyspace = %keyspace,
                    key = key.as_deref().unwrap_or(""),
                    detail = %detail,
                    "the data directory is damaged: the operation that read it failed, and the runtime is unhealthy"
                );
                self.count.fetch_add(1, Ordering::Relaxed);
                let mut first = self.first.lock().unwrap_or_else(|e| e.into_inner());
                if first.is_none() {
                    *first = Some(fault.clone());
                }
            }
            StoreFault::Unreadable { keyspace, detail } => {
                tracing::error!(keyspace = %keyspace, detail = %detail, "the data directory could not be read");
            }
            // Not damage: logged once, where the slot was given up.
            StoreFault::NotOwner { .. } => {}
        }
    }

    /// The tally now.
    pub(crate) fn health(&self) -> Health {
        Health {
            damaged_reads: self.count.load(Ordering::Relaxed),
            first_damage: self.first.lock().unwrap_or_else(|e| e.into_inner()).clone(),
        }
    }
}

/// What a failed read of the store means to an operation; `None` for a stopped store.
fn fault_of(err: &StoreError) -> Option<StoreFault> {
    match err {
        StoreError::Corrupt {
            space, key, detail, ..
        } => Some(StoreFault::Corrupt {
            keyspace: (*space).to_owned(),
            key: key.as_deref().map(|key| shown_key(space, key)),
            detail: detail.clone(),
        }),
        StoreError::Read { space, cause, .. } => Some(StoreFault::Unreadable {
            keyspace: (*space).to_owned(),
            detail: cause.clone(),
        }),
        _ => None,
    }
}

/// A key as a person reads it: a key that starts with a subject's name (a subject's
/// part) as `name/rest`, any other as its text, escaped where it is not plain.
pub(crate) fn shown_key(space: &str, key: &[u8]) -> String {
    let space = Space::ALL.iter().find(|s| s.name() == space);
    let named = space.is_some_and(|s| s.has_named_keys());
    if named && let Some((name, rest)) = layout::split_part(key) {
        let rest = key_text(rest);
        // `key_text` quotes; the name and the rest are joined unquoted.
        return format!("{name}/{}", &rest[1..rest.len() - 1]);
    }
    // A slotted key is shown without its slot, which its name or id implies.
    let key = match space
        .filter(|s| s.is_slotted())
        .map(|_| layout::split_slot(key))
    {
        Some(Some((_, rest))) => rest,
        _ => key,
    };
    let text = key_text(key);
    text[1..text.len() - 1].to_owned()
}
