//! Every value the runtime keeps in the store, decoded to check it: what `parkway check`
//! reads each key's value with. A value that decodes here is one the runtime reads back;
//! one that does not is damage it would meet. Nothing is interpreted beyond that.

use super::durable::{KeptRecord, marks_of};
use super::effect::Waiting;
use super::index::{Head, due_of};
use super::state::check_part;
use crate::store::layout::{SEQUENTIAL, TIMERS};
use crate::store::{FORMAT_VERSION, Space, VERSION_KEY, chunk_entries};

/// What is wrong with `value`, kept under `key` in `space` by this format version;
/// `Ok(())` when it decodes.
pub(crate) fn check(space: Space, key: &[u8], value: &[u8]) -> Result<(), String> {
    let json = |e: serde_json::Error| format!("it does not decode: {e}");
    match space {
        Space::Meta if key == VERSION_KEY => std::str::from_utf8(value)
            .ok()
            .and_then(|v| v.parse::<u32>().ok())
            .filter(|v| *v == FORMAT_VERSION)
            .map(drop)
            .ok_or_else(|| "the format version is not this build's".to_owned()),
        Space::Meta => Ok(()),
        Space::Subjects | Space::Entries | Space::RunStates | Space::Groups | Space::Resolved => {
            check_part(space, value).map(drop).map_err(json)
        }
        Space::Records => serde_json::from_slice::<KeptRecord>(value)
            .map(drop)
            .map_err(json),
        Space::Doors => serde_json::from_slice::<crate::door::spec::Spec>(value)
            .map(drop)
            .map_err(json),
        Space::Events => {
            for entry in chunk_entries(key, value)? {
                serde_json::from_slice::<crate::event::Event>(&entry)
                    .map_err(|e| format!("an event in the chunk does not decode: {e}"))?;
            }
            Ok(())
        }
        Space::Ids if key == SEQUENTIAL => marks_of(value)
            .map(drop)
            .ok_or_else(|| "the ids' counters are not 24 bytes".to_owned()),
        Space::Ids if key == TIMERS || crate::store::layout::is_node_timers_key(key) => {
            (value.len() == 8)
                .then_some(())
                .ok_or_else(|| "the timer keys' counter is not 8 bytes".to_owned())
        }
        Space::Ids => Ok(()),
        Space::Undelivered => serde_json::from_slice::<Waiting>(value)
            .map(drop)
            .map_err(json),
        Space::Keys => serde_json::from_slice::<crate::keys::Kept>(value)
            .map(drop)
            .map_err(json),
        Space::Heads => Head::from_bytes(value)
            .map(drop)
            .ok_or_else(|| "the head is not 13 bytes of counts and flags".to_owned()),
        Space::Wakes => due_of(key, value)
            .map(drop)
            .ok_or_else(|| "the wake's key or value does not decode".to_owned()),
        Space::Runs => std::str::from_utf8(value)
            .map(drop)
            .map_err(|e| format!("the run's subject is not text: {e}")),
    }
}
