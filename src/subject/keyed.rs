//! The hub's idempotency keys and hook delivery ids: keeping one once its work is durable
//! (its forgetting armed on the supervisor's timers), reading them back on open, and
//! firing a hook delivery at most once. The key table itself is [`crate::keys`].

use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::hub::Hub;
use crate::keys::{Claim, DeliveryError, Kept, hook_key};
use crate::settings::Settings;
use crate::store::{Batch, Space, Store, layout};
use crate::supervisor::Timer;

/// The horizon of a key first used at `at`.
fn horizon(settings: &Settings, at: DateTime<Utc>) -> DateTime<Utc> {
    chrono::Duration::from_std(settings.waiting_retention)
        .ok()
        .and_then(|d| at.checked_add_signed(d))
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

impl Hub {
    /// The work of the key `name` is durable: it is known until its horizon.
    pub(crate) fn keep_key(&self, name: String, kept: Kept) {
        let s = &self.services;
        let at = horizon(&s.settings, kept.at);
        self.keys.settle(&name, kept);
        s.timers.arm(
            s.keys.key(at),
            Timer::Forget {
                key: Arc::from(name),
            },
        );
    }

    /// Read back the keys the store holds: those within their horizon are known again
    /// (their forgetting armed), older ones are deleted.
    pub(crate) fn recover_keys(&self, store: &Store) -> Result<(), String> {
        let now = self.services.clock.now();
        let mut stale = Batch::new();
        let entries = store.scan(Space::Keys).map_err(|e| e.to_string())?;
        for (key, value) in entries {
            let name = layout::unslotted_shown(&key).into_owned();
            let kept: Kept = serde_json::from_slice(&value)
                .map_err(|e| format!("key {name} cannot be read back: {e}"))?;
            if horizon(&self.services.settings, kept.at) <= now {
                stale.delete(Space::Keys, key);
            } else {
                self.keep_key(name, kept);
            }
        }
        if !stale.is_empty() {
            store.submit(stale, Box::new(|_| {}));
        }
        Ok(())
    }

    /// Fire `topic` for the delivery `delivery` once: a delivery seen within the horizon
    /// is not fired again.
    pub(crate) async fn fire_once(
        self: &Arc<Self>,
        topic: &str,
        delivery: &str,
        fingerprint: u64,
        fire: impl std::future::Future<Output = Vec<crate::HookFire>>,
    ) -> Result<Vec<crate::HookFire>, DeliveryError> {
        DeliveryError::check_id(delivery)?;
        let name = hook_key(topic, delivery);
        match self.keys.claim(&name, fingerprint) {
            Claim::New => {}
            Claim::Known(kept) => return Err(DeliveryError::AlreadySeen { at: kept.at }),
            Claim::Busy => return Err(DeliveryError::InProgress),
            Claim::Reused => return Err(DeliveryError::Reused),
        }
        let fires = fire.await;
        let kept = Kept {
            run: None,
            fingerprint,
            at: self.services.clock.now(),
        };
        if let Some(store) = &self.services.store {
            let mut batch = Batch::of_slot(layout::kept_slot(&name));
            match serde_json::to_vec(&kept) {
                Ok(bytes) => {
                    batch.put(Space::Keys, layout::kept_key(&name), bytes);
                }
                Err(error) => tracing::error!(%error, "a delivery id could not be kept"),
            }
            let (tx, rx) = tokio::sync::oneshot::channel();
            store.submit(
                batch,
                Box::new(move |result| {
                    let _ = tx.send(result);
                }),
            );
            if !matches!(rx.await, Ok(Ok(_))) {
                // Not kept: a retry fires again rather than being told it was seen.
                self.keys.release(&name);
                return Ok(fires);
            }
        }
        self.keep_key(name, kept);
        Ok(fires)
    }
}
