//! The disk engine of a build without the `disk` feature: there is none. Opening a data
//! directory is refused, naming the feature, and nothing of fjall is compiled.
//!
//! [`Disk`] has no value, so its [`Engine`] methods, which let the store compile
//! unchanged, can never run.

use std::path::Path;

use super::engine::{Engine, ReadFailure, WriteFailure};
use super::{Batch, Entries, OnDamage, OpenError, Recovered, Space};

/// An open data directory, of which this build has none.
pub(super) enum Disk {}

impl Disk {
    /// Refuses: this build keeps nothing on disk.
    pub(super) fn open(dir: &Path, on_damage: OnDamage) -> Result<(Disk, Recovered), OpenError> {
        Disk::open_as(dir, on_damage)
    }

    /// Refuses: this build keeps nothing on disk.
    pub(super) fn open_as(dir: &Path, _: OnDamage) -> Result<(Disk, Recovered), OpenError> {
        Err(OpenError::NoDisk {
            path: dir.to_path_buf(),
        })
    }
}

impl Engine for Disk {
    fn write(&self, _: &mut Vec<Batch>, _: u64) -> Result<(), WriteFailure> {
        match *self {}
    }

    fn sync(&self) -> Result<bool, String> {
        match *self {}
    }

    fn get(&self, _: Space, _: &[u8]) -> Result<Option<Vec<u8>>, ReadFailure> {
        match *self {}
    }

    fn range_from(&self, _: Space, _: &[u8], _: &[u8], _: usize) -> Result<Entries, ReadFailure> {
        match *self {}
    }

    fn prefixed(&self, _: Space, _: &[u8]) -> Result<Entries, ReadFailure> {
        match *self {}
    }

    fn keys(&self, _: Space) -> Result<Vec<Vec<u8>>, ReadFailure> {
        match *self {}
    }

    fn scan(&self, _: Space) -> Result<Entries, ReadFailure> {
        match *self {}
    }
}
