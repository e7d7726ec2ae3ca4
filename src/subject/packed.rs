//! A passive subject's state, packed into compact JSON text and compressed.
//!
//! A passive subject keeps its state until a message wakes it, which may be hours. Held
//! as live data, a parked ask is a dozen small allocations (its entry, its run with the
//! run's journal and group, the tables' slots); packed, it is the text of
//! the same data, compressed with LZ4 (the text repeats each id several times, and every
//! field name once per entry or run). The subject packs when it passivates and unpacks
//! when a message wakes it; both are measured in `benches/subject.rs`, the memory in
//! `examples/memory.rs`, and both figures are in `docs/benchmarks.md`.
//!
//! Only plain data is packed. A state that holds something of an executing activation
//! (a receiver, a blocked `sync` ask's waiter, an abort handle) is handed back unpacked;
//! the subject passivates only with nothing executing, so that is not expected, but it
//! is not lost either.

use std::sync::Arc;

use serde::Deserialize;

use super::state::State;

/// A subject's state as compact JSON text, compressed.
#[derive(Clone)]
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
    pub(crate) fn pack(state: Box<State>) -> Result<Self, Box<State>> {
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

    /// A state read back from format version 1's store, which kept each state packed,
    /// named `name`.
    pub(crate) fn decode(bytes: &[u8], name: Arc<str>) -> Result<Box<State>, Unpack> {
        Self(bytes.into()).unpack(name)
    }

    /// The state back, named `name`. The text was written from a state, so this fails
    /// only if that state could not be written faithfully. The parser's own limit is off
    /// (this is why `serde_json`'s `unbounded_depth` is on): a state nests its values a
    /// few levels down (an entry's payload, a journal's answers and step results), past
    /// the parser's 128 levels for a value at [`MAX_VALUE_DEPTH`](crate::MAX_VALUE_DEPTH).
    /// The text was written by the runtime from values checked against that limit, so
    /// its depth is bounded all the same; no outside text is read here.
    pub(crate) fn unpack(&self, name: Arc<str>) -> Result<Box<State>, Unpack> {
        let text = lz4_flex::decompress_size_prepended(&self.0)?;
        let mut de = serde_json::Deserializer::from_slice(&text);
        de.disable_recursion_limit();
        let mut state = Box::new(State::deserialize(&mut de)?);
        de.end()?;
        state.name = name;
        Ok(state)
    }

    /// The packed bytes, as format version 1 kept a state in the store.
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.0
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A subject's state with one parked ask, a waiting outcome and an open group, as
    /// its own serialization writes it.
    const STATE: &str = r#"{"entries":{"i-1":{"entry":{"id":"i-1","status":"asking","to":"caller","asked_by":["asker","main"],"question":"proceed?","group_id":"g-1","payload":{"deep":[1,{"x":null}],"n":1.5}},"run":"r-1","on_expiry":"kill","timer":{"at":"2026-01-01T01:00:00Z","seq":7},"answer":null,"outcome":null},"i-2":{"entry":{"id":"i-2","status":"finished"},"run":"r-2","on_expiry":"resume","timer":null,"answer":null,"outcome":{"Ok":{"answer":"yes"}}}},"runs":{"r-1":{"target":"asker","parent":"r-0","linked":true,"identity":"door:work","lineage":["asker","main"],"kwargs":"{\"a\":1}","extras":"{}","journal":[{"op":"ask","interaction":"i-1","question":"proceed?"}],"status":"parked","epoch":1,"group":"g-1","resumed_group":null,"resumed_by":null,"started_at":"2026-01-01T00:00:00Z","resumed_interactions":["i-0"]}},"groups":{"g-1":{"run":"r-1","members":["i-1"],"open":false}}}"#;

    fn state() -> Box<State> {
        let mut state: Box<State> = serde_json::from_str(STATE).expect("a state");
        state.name = Arc::from("s");
        state
    }

    #[test]
    fn a_state_unpacks_to_what_was_packed_and_smaller() {
        let packed = Packed::pack(state()).expect("packs");
        assert!(packed.len() < STATE.len(), "{} bytes", packed.len());
        let back = packed.unpack(Arc::from("s")).expect("unpacks");
        assert_eq!(&*back.name, "s");
        let text = serde_json::to_string(&*back).expect("writes");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&text).unwrap(),
            serde_json::from_str::<serde_json::Value>(STATE).unwrap()
        );
    }

    #[test]
    fn damaged_text_is_an_error_not_a_panic() {
        let packed = Packed::pack(state()).expect("packs");
        let mut bytes = packed.0.to_vec();
        bytes.truncate(bytes.len() / 2);
        assert!(matches!(
            Packed(bytes.into_boxed_slice()).unpack(Arc::from("s")),
            Err(Unpack::Decompress(_))
        ));
        let text = lz4_flex::compress_prepend_size(br#"{"entries": 1}"#);
        assert!(matches!(
            Packed(text.into_boxed_slice()).unpack(Arc::from("s")),
            Err(Unpack::Read(_))
        ));
    }
}
