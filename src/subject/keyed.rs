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

    /// Read back the keys the store holds whose keys start with `within` (every key when
    /// empty, one slot's with its prefix, as a node takes the slot): those within their
    /// horizon are known again (their forgetting armed), older ones are deleted.
    pub(crate) fn recover_keys(&self, store: &Store, within: &[u8]) -> Result<(), String> {
        let now = self.services.clock.now();
        let mut stale = Vec::new();
        super::durable::walk(store, Space::Keys, within, |key, value| {
            let name = layout::unslotted_shown(key).into_owned();
            let kept: Kept = serde_json::from_slice(value)
                .map_err(|e| format!("key {name} cannot be read back: {e}"))?;
            if horizon(&self.services.settings, kept.at) <= now {
                stale.push(name);
            } else if self.keys.known(&name).as_ref() != Some(&kept) {
                // Known already (read at the open, or kept here): its forgetting is armed.
                self.keep_key(name, kept);
            }
            Ok(())
        })?;
        for name in stale {
            self.delete_key(store, &name);
        }
        Ok(())
    }

    /// The key `name` reached its horizon: forgotten, and deleted from the store by the
    /// node that may write it (an idempotency key's by its slot's owner; another node
    /// only forgets it).
    pub(crate) fn forget_key(&self, name: &str) {
        if self.keys.forget(name)
            && let Some(store) = &self.services.store
        {
            self.delete_key(store, name);
        }
    }

    /// Delete the key `name` from `store`; nothing waits on this (a restart before it
    /// is durable forgets the key again).
    fn delete_key(&self, store: &Store, name: &str) {
        let mut batch = if layout::kept_by_slot(name) {
            let slot = layout::kept_slot(name);
            if self.services.away.is_away(slot) {
                return;
            }
            Batch::of_slot(slot)
        } else {
            Batch::new()
        };
        batch.delete(Space::Keys, layout::kept_key(name));
        store.submit(batch, Box::new(|_| {}));
    }

    /// The delivery id `name`, unknown here, as the store keeps it, if another node
    /// that shares the store fired it: known from now on.
    async fn read_delivery(&self, name: &str) {
        let Some(store) = self.services.store.clone() else {
            return;
        };
        if self.services.cluster.get().is_none() || self.keys.known(name).is_some() {
            return;
        }
        let key = layout::kept_key(name);
        let read = tokio::task::spawn_blocking(move || store.get(Space::Keys, &key)).await;
        let kept = match read {
            Ok(Ok(Some(bytes))) => match serde_json::from_slice::<Kept>(&bytes) {
                Ok(kept) => kept,
                Err(error) => {
                    tracing::error!(delivery = name, %error, "a delivery id kept by another node cannot be read: it is fired as new");
                    return;
                }
            },
            Ok(Ok(None)) => return,
            Ok(Err(error)) => {
                tracing::warn!(delivery = name, %error, "whether another node fired the delivery could not be read: it is fired as new");
                return;
            }
            Err(_) => return,
        };
        if horizon(&self.services.settings, kept.at) > self.services.clock.now() {
            self.keep_key(name.to_owned(), kept);
        }
    }

    /// Fire `topic` for the delivery `delivery` once (`fire` makes the fire and answers
    /// with it): a delivery seen within the horizon is not fired again.
    pub(crate) async fn fire_once<T>(
        self: &Arc<Self>,
        topic: &str,
        delivery: &str,
        fingerprint: u64,
        fire: impl std::future::Future<Output = T>,
    ) -> Result<T, DeliveryError> {
        DeliveryError::check_id(delivery)?;
        let name = hook_key(topic, delivery);
        self.read_delivery(&name).await;
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
            // The runtime's, not a slot's: any node keeps it.
            let mut batch = Batch::new();
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::clock::{Clock, ManualClock};
    use crate::ids::Ids;
    use crate::keys::{Kept, legacy_run_key};
    use crate::runtime::{Runtime, Start};
    use crate::store::{Batch, Space, Store, layout};

    /// A key kept before keys were their subject's (`run:` and the key) answers the same
    /// start after an open until its horizon; another start under it is a new key.
    #[tokio::test]
    async fn a_key_kept_under_its_old_name_answers_the_same_start() {
        let clock = ManualClock::default();
        let store = Store::memory();
        let keyed = || Start::new("s", "echo").idempotency_key("k");
        let kept = Kept {
            run: Some("r-9".to_owned()),
            fingerprint: keyed().fingerprint(),
            at: clock.now(),
        };
        let mut batch = Batch::new();
        let name = legacy_run_key("k");
        batch.put(
            Space::Keys,
            layout::kept_key(&name),
            serde_json::to_vec(&kept).unwrap(),
        );
        let (tx, rx) = tokio::sync::oneshot::channel();
        store.submit(
            batch,
            Box::new(move |result| {
                let _ = tx.send(result.is_ok());
            }),
        );
        assert_eq!(rx.await, Ok(true));
        let rt = Runtime::builder()
            .without_env()
            .clock(clock.clone())
            .ids(Ids::sequential())
            .store(store)
            .register("echo", &[], |_, kwargs, _| async move { Ok(kwargs) })
            .build()
            .await
            .expect("builds");
        assert_eq!(rt.submit(keyed()).await.unwrap(), "r-9");
        let other = keyed().kwargs(json!({"n": 1}));
        let started = rt.submit(other.clone()).await.unwrap();
        assert_ne!(started, "r-9");
        assert_eq!(rt.submit(other).await.unwrap(), started);
        rt.shutdown().await;
    }
}
