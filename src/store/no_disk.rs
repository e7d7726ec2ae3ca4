//! The disk engine of a build without the `disk` feature: there is none. Opening a data
//! directory is refused, naming the feature, and nothing of fjall is compiled.
//!
//! [`Disk`] has no value, so the writer's disk branches, which this module lets compile
//! unchanged, can never run.

use std::path::Path;
use std::sync::Arc;

use super::{Batch, Entries, OnDamage, OpenError, Recovered, Space, StoreError};

/// An open data directory, of which this build has none.
pub(super) enum Disk {}

impl Disk {
    /// Refuses: this build keeps nothing on disk.
    pub(super) fn open_as(dir: &Path, _: OnDamage) -> Result<(Disk, Recovered), OpenError> {
        Err(OpenError::NoDisk {
            path: dir.to_path_buf(),
        })
    }

    pub(super) fn close(&self, _: bool) {
        match *self {}
    }

    pub(super) fn write(&self, _: &[Batch]) -> Result<(), String> {
        match *self {}
    }

    pub(super) fn sync(&self) -> Result<(), String> {
        match *self {}
    }

    pub(super) fn get(&self, _: Space, _: &[u8]) -> Result<Option<Vec<u8>>, ReadFailure> {
        match *self {}
    }

    pub(super) fn range_from(&self, _: Space, _: &[u8], _: usize) -> Result<Entries, ReadFailure> {
        match *self {}
    }

    pub(super) fn prefixed(&self, _: Space, _: &[u8]) -> Result<Entries, ReadFailure> {
        match *self {}
    }

    pub(super) fn keys(&self, _: Space) -> Result<Vec<Vec<u8>>, ReadFailure> {
        match *self {}
    }

    pub(super) fn scan(&self, _: Space) -> Result<Entries, ReadFailure> {
        match *self {}
    }
}

/// A failed read of a data directory, of which this build has none.
pub(super) enum ReadFailure {}

impl ReadFailure {
    pub(super) fn into_error(self, _: &Arc<str>, _: Space, _: Option<&[u8]>) -> StoreError {
        match self {}
    }
}
