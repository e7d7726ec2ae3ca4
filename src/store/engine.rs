//! The seam between the writer and what keeps the bytes: [`Engine`], which the memory
//! engine, the fjall engine (`disk`) and the fault-injecting wrapper implement.
//!
//! The writer (`super::writer`) owns everything that is the same for every engine: the
//! queue, group commit, the log's numbering, acks in submission order and the poison.
//! An engine only writes groups, syncs them and reads; it never calls an ack.

use std::sync::Arc;

use super::owners::Owners;
use super::{Batch, Entries, Space, StoreError};
use crate::slot::Slot;

/// What keeps a store's bytes: keyspaces ([`Space`]) of keys and values, written a group
/// of batches at a time and made durable by a sync.
///
/// What an engine must guarantee, and the writer relies on:
///
/// - **Atomic groups.** [`Engine::write`] applies the group's batches in order, all or
///   nothing: after a crash, a group is there whole or not at all, and a later mutation
///   of a key wins over an earlier one. Groups are written by one thread at a time.
/// - **Durable after a sync.** Once [`Engine::sync`] returns `Ok(true)`, every group
///   written before the call survives a crash (a process killed, the machine stopped).
///   Nothing is promised of a group written and not synced: it may be kept or lost.
///   An engine that commits a transaction per group commit opens it at the first write
///   and commits it at the sync.
/// - **Reads see what was written.** A read after a write sees it (on disk before the
///   sync too: the writer refuses every read of a store whose write or sync failed, so
///   nothing read was lost since). Scans are in key order, bytes compared as unsigned,
///   and a range or a prefix is read without reading the rest of the space.
/// - **Failures say why.** A failed write or sync is a cause in words; the writer
///   poisons the store with it. A failed read says whether the data is damaged
///   ([`ReadFailure::damaged`]) or the engine could not read it.
/// - **The format version.** [`Space::Meta`] is kept like any space; an engine's open
///   (its own constructor) writes [`super::FORMAT_VERSION`] under
///   [`super::VERSION_KEY`] in a new store and refuses one whose version this build
///   does not read.
///
/// The key layout is the store's (`super::layout`), the same for every engine.
pub(crate) trait Engine: Send + Sync {
    /// Applies `group` atomically, not yet durable. The engine may take the batches
    /// (leaving `group` empty) or leave them, which the writer then drops. `generation`
    /// is [`Engine::generation`] as it was when the group was taken from the queue.
    ///
    /// [`WriteFailure::NotOwner`] refuses the whole group for slots this process does
    /// not own ([`Batch::slot`]): nothing of it is written and `group` is left as it was,
    /// and the writer writes it again without those slots' batches.
    fn write(&self, group: &mut Vec<Batch>, generation: u64) -> Result<(), WriteFailure>;

    /// Whether the engine numbers the log itself: a log that several processes write,
    /// whose numbers only the database can hand out in commit order. The writer then
    /// puts a group's log entries under the chunk key of `(0, n)` in its head batch, the
    /// engine stages them and numbers them after the commit ([`Engine::number_log`]),
    /// trims the log itself ([`Engine::keep_log`]), and the log is read with
    /// [`Engine::log_chunks`], once what is staged is numbered.
    fn numbers_log(&self) -> bool {
        false
    }

    /// Numbers what a log the engine numbers holds staged (the chunks of groups
    /// committed and not yet numbered), in commit order; how many chunks it numbered.
    /// Every group committed before the call is numbered when it returns.
    fn number_log(&self) -> Result<u64, String> {
        Ok(0)
    }

    /// How many entries a log the engine numbers keeps: a chunk all of whose entries
    /// are further back than this from its end is deleted.
    fn keep_log(&self, _entries: u64) {}

    /// Of a log the engine numbers, the number its next entry gets (1 for an engine
    /// that does not number the log).
    fn log_next(&self) -> Result<u64, ReadFailure> {
        Ok(1)
    }

    /// Of a log the engine numbers, the chunks holding entries from `from` on, oldest
    /// first, at most `limit` of them past the one holding `from`: each its first
    /// number, its count and its value. An engine that does not number the log has none.
    fn log_chunks(&self, _from: u64, _limit: usize) -> Result<Vec<LogChunk>, ReadFailure> {
        Ok(Vec::new())
    }

    /// Makes every group written since the last sync durable; `Ok(false)` if a simulated
    /// crash since the groups were taken lost them (nothing of them is kept, and no one
    /// is told).
    fn sync(&self) -> Result<bool, String>;

    /// Whether the writer may write the next group while a sync of the last runs on
    /// another thread (the disk engine's journal allows it): a group's cycle then costs
    /// the longer of its write and its sync, not their sum.
    fn pipelined(&self) -> bool {
        false
    }

    /// What the engine is doing in the background now, each thing named first by its
    /// kind (`flushing 2 memtables`): noted beside a write or a sync that stalled. With
    /// `system`, also what the system is doing that the engine's writes wait on (slower
    /// to read: only once a stall is known). An engine that does nothing in the
    /// background reports nothing.
    fn activity(&self, _system: bool) -> Vec<String> {
        Vec::new()
    }

    /// The count of simulated crashes so far: a group taken in an earlier generation is
    /// lost at its sync. An engine that is crashed only by ending the process keeps 0.
    fn generation(&self) -> u64 {
        0
    }

    /// Simulates a crash: every group written and not synced is lost. `false` if the
    /// engine cannot (a disk is crashed by ending the process).
    fn crash(&self) -> bool {
        false
    }

    /// The engine as the next process finds it after a simulated crash, to open a store
    /// on; `None` if it has none.
    fn reopened(&self) -> Option<Arc<dyn Engine>> {
        None
    }

    /// Releases the engine (after the writer stopped); `flush`: first write what it
    /// holds in memory, so the next open has less to replay. Every later use fails.
    /// An engine whose slots have owners gives back the slots it owns first.
    fn close(&self, _flush: bool) {}

    /// The slots this process owns and the changes to come, once (`None` after the
    /// first call, and from an engine that owns every slot while open: every engine but
    /// one whose slots have owners).
    fn owners(&self) -> Option<Owners> {
        None
    }

    /// Gives `slot` back, once this process has unloaded it after a
    /// [`Change::Drain`](super::owners::Change::Drain), so another node may take it. An engine that owns every slot
    /// keeps it.
    fn release(&self, _slot: Slot) -> Result<(), String> {
        Ok(())
    }

    /// Whether `slot` may be served here now. An engine whose slots have owners says
    /// whether it holds the slot with its time to be served not passed; a slot found
    /// past its time is given up at once (the runtime told, as a write that found it
    /// would), so a node that was paused past its lease serves nothing of it, not even
    /// a read, before its next round. An engine that owns every slot serves every one.
    fn serves(&self, _slot: Slot) -> bool {
        true
    }

    /// Where `slot` is served, if another node owns it (`http://host:port`, as that node
    /// gave it). An engine that owns every slot knows none.
    fn owner(&self, _slot: Slot) -> Option<Arc<str>> {
        None
    }

    /// Keeps the leases once now, as the engine does on its own every third of a lease
    /// (tests, which cannot wait for it).
    #[cfg(test)]
    fn lease_round(&self) -> Result<(), String> {
        Ok(())
    }

    /// Ends the time `slot` is served here, as a renewal that came back too late does
    /// (tests).
    #[cfg(test)]
    fn lapse_served(&self, _slot: crate::slot::Slot) {}

    /// Sends the next group commit twice, running `between` (SQL) between the two, as
    /// a connection that failed after the server made the commit has it sent again
    /// (tests).
    #[cfg(test)]
    fn send_next_twice(&self, _between: &'static str) {}

    /// One key's value, as written.
    fn get(&self, space: Space, key: &[u8]) -> Result<Option<Vec<u8>>, ReadFailure>;

    /// Up to `limit` of a space's entries from `from` on whose keys start with `within`
    /// (every key starts with an empty one), as written, in key order: what follows
    /// the prefix is not read.
    fn range_from(
        &self,
        space: Space,
        from: &[u8],
        within: &[u8],
        limit: usize,
    ) -> Result<Entries, ReadFailure>;

    /// A space's entries whose keys start with `prefix`, as written, in key order.
    fn prefixed(&self, space: Space, prefix: &[u8]) -> Result<Entries, ReadFailure>;

    /// A space's keys, as written, in key order.
    fn keys(&self, space: Space) -> Result<Vec<Vec<u8>>, ReadFailure>;

    /// A space's contents, as written, in key order.
    fn scan(&self, space: Space) -> Result<Entries, ReadFailure>;
}

/// A chunk of a log the engine numbers: its first entry's number, its count, its value.
pub(crate) type LogChunk = (u64, u32, Vec<u8>);

/// Why a group was not written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum WriteFailure {
    /// The engine failed, in these words: the writer stops the store.
    Failed(String),
    /// Refused, whole, for these slots, which this process does not own: nothing of the
    /// group was written.
    NotOwner(Vec<Slot>),
}

/// A failure in words.
impl From<String> for WriteFailure {
    fn from(cause: String) -> WriteFailure {
        WriteFailure::Failed(cause)
    }
}

/// Why a read of an open store failed: the data read is damaged, or the engine could not
/// read it (the disk, the system, the server).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReadFailure {
    /// The engine met bytes it cannot decode: a block whose checksum does not match, an
    /// unknown tag, a block that does not decompress, a file cut short.
    pub(crate) damaged: bool,
    /// What the engine said, in words.
    pub(crate) cause: String,
}

impl ReadFailure {
    /// The store's error for this failure of a read of `space` (at `key`, if it named
    /// one) in the store named `store`: corrupt if damaged, a read failure otherwise.
    pub(crate) fn into_error(
        self,
        store: &Arc<str>,
        space: Space,
        key: Option<&[u8]>,
    ) -> StoreError {
        let store = Arc::clone(store);
        if self.damaged {
            StoreError::Corrupt {
                store,
                space: space.name(),
                key: key.map(<[u8]>::to_vec),
                detail: self.cause,
            }
        } else {
            StoreError::Read {
                store,
                space: space.name(),
                cause: self.cause,
            }
        }
    }
}

/// A failure that is not damage (a store that is closed, a refused read).
impl From<String> for ReadFailure {
    fn from(cause: String) -> ReadFailure {
        ReadFailure {
            damaged: false,
            cause,
        }
    }
}
