//! Doors saved by other nodes: on a database nodes share, each node reads the saved
//! doors again every second and takes what another node saved, replaced or removed
//! since it last looked (`docs/postgres.md`, "Several nodes").

use std::collections::BTreeMap;

use super::registry::Doors;
use crate::services::Services;
use crate::store::{Space, layout};

/// The saved doors as last read: each door's name and its spec's bytes.
#[derive(Debug, Default)]
pub(crate) struct Seen(BTreeMap<String, Vec<u8>>);

impl Seen {
    /// Reads the saved doors again and applies to `doors` what changed in the store
    /// since the last read: a door saved or replaced elsewhere is compiled and kept (one
    /// that no longer compiles is left out with an error logged), a door removed
    /// elsewhere forgotten. A door this node changed since is left as this node has it.
    pub(crate) fn refresh(&mut self, services: &Services, doors: &Doors) -> Result<(), String> {
        let Some(store) = &services.store else {
            return Ok(());
        };
        let now: BTreeMap<String, Vec<u8>> = store
            .scan(Space::Doors)
            .map_err(|e| e.to_string())?
            .into_iter()
            .map(|(key, value)| (layout::plain_shown(&key).into_owned(), value))
            .collect();
        let before = std::mem::take(&mut self.0);
        for (name, bytes) in &now {
            if before.get(name) == Some(bytes) || held_as(doors, name).as_ref() == Some(bytes) {
                continue;
            }
            match serde_json::from_slice::<super::spec::Spec>(bytes) {
                Ok(spec) => {
                    if let Err(error) = doors.restore(services, spec) {
                        tracing::error!(door = %name, %error, "a door another node saved does not compile here; it is left out");
                    }
                }
                Err(error) => {
                    tracing::error!(door = %name, %error, "a door another node saved cannot be read; it is left out");
                }
            }
        }
        for (name, bytes) in &before {
            if !now.contains_key(name) && held_as(doors, name).as_ref() == Some(bytes) {
                doors.remove(name);
            }
        }
        self.0 = now;
        Ok(())
    }
}

/// The bytes `name`'s spec is saved as, as this node holds it.
fn held_as(doors: &Doors, name: &str) -> Option<Vec<u8>> {
    doors
        .get(name)
        .and_then(|door| serde_json::to_vec(&door.spec).ok())
}
