//! A passive subject's state, packed into compact JSON text and compressed.
//!
//! A passive subject keeps its state until a message wakes it, which may be hours. Held
//! as live data, a parked ask is a dozen small allocations (its entry, its run with the
//! run's journal and group, the tables' slots), about 1.5 KiB; packed, it is the text of
//! the same data, compressed with LZ4 (the text repeats each id several times, and every
//! field name once per entry or run). The subject packs when it passivates and unpacks when a message wakes
//! it; both are measured in `benches/subject.rs`, the memory in `examples/memory.rs`.
//!
//! Only plain data is packed. A state that holds something of an executing activation
//! (a receiver, a blocked `sync` ask's waiter, an abort handle) is handed back unpacked;
//! the subject passivates only with nothing executing, so that is not expected, but it
//! is not lost either.

use std::sync::Arc;

use serde::Deserialize;

use super::state::SubjectState;

/// A subject's state as compact JSON text, compressed.
pub(crate) struct Packed(Box<[u8]>);

/// Why a packed state could not be read back.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Unpack {
    /// The compressed text is damaged.
    #[error("its compressed text is damaged: {0}")]
    Decompress(#[from] lz4_flex::block::DecompressError),
    /// The text does not read as a state.
    #[error("its text does not read as a state: {0}")]
    Read(#[from] serde_json::Error),
}

impl Packed {
    /// Pack `state`, or hand it back if it cannot be packed (see the module doc).
    pub(crate) fn pack(state: Box<SubjectState>) -> Result<Self, Box<SubjectState>> {
        if state.holds_activation() {
            return Err(state);
        }
        match serde_json::to_vec(&*state) {
            Ok(text) => Ok(Self(
                lz4_flex::compress_prepend_size(&text).into_boxed_slice(),
            )),
            Err(e) => {
                tracing::warn!(subject = %state.name, error = %e, "subject state kept unpacked");
                Err(state)
            }
        }
    }

    /// The state back, named `name`. The text was written from a state, so this fails
    /// only if that state could not be written faithfully; no depth limit applies, since
    /// every value in it already existed at its depth.
    pub(crate) fn unpack(&self, name: Arc<str>) -> Result<Box<SubjectState>, Unpack> {
        let text = lz4_flex::decompress_size_prepended(&self.0)?;
        let mut de = serde_json::Deserializer::from_slice(&text);
        de.disable_recursion_limit();
        let mut state = Box::new(SubjectState::deserialize(&mut de)?);
        de.end()?;
        state.name = name;
        Ok(state)
    }

    /// The packed (compressed) size in bytes.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }
}

impl std::fmt::Debug for Packed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Packed").field(&self.0.len()).finish()
    }
}
