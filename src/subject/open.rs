//! Opening a data directory: what is shared read back first, a directory of the older
//! format upgraded, then the subjects' heads.

use std::sync::Arc;

use super::hub::Hub;

/// Read back what an open needs before the runtime takes work, and nothing more: the
/// ids' counters, the doors (recompiled; one that no longer compiles is left out with an
/// error logged), the keys in use, and the subjects' heads, summed into the ceilings.
/// Only the subjects whose head says they must be read are read: those whose run was
/// executing (each recovered by its own actor, then replayed) and those offering a user
/// ask (for the inbox). Every other subject stays on disk until a message or its wake
/// (`super::index`, read by the ticker) reads it back; an ended run's record is read
/// when asked for, and dropped when its horizon's wake comes. A directory of the older
/// format is upgraded first (`super::upgrade`).
pub(crate) async fn recover(hub: &Arc<Hub>) -> Result<(), String> {
    let Some(store) = hub.services.store.clone() else {
        return Ok(());
    };
    super::durable::recover_shared(hub, &store)?;
    if store.format_version().map_err(|e| e.to_string())? == crate::store::UPGRADES_FROM {
        super::upgrade::upgrade(hub, &store).await?;
    }
    if !hub.services.away.any() {
        return super::durable::recover_subjects(hub, &store, b"").await;
    }
    // Some slots are other nodes': only this process's are read, one at a time.
    let owned: Vec<crate::slot::Slot> = crate::slot::Slot::all()
        .filter(|slot| !hub.services.away.is_away(*slot))
        .collect();
    for slot in owned {
        let prefix = crate::store::layout::slot_prefix(slot);
        super::durable::recover_subjects(hub, &store, &prefix).await?;
    }
    Ok(())
}
