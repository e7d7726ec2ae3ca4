//! A subject's table of entries or runs that knows which of its keys changed since it was
//! last written, so a durable change writes those keys only (`super::parts`).
//!
//! Every change goes through a method that marks its key: the table offers no way to
//! change a value unmarked but [`Tracked::for_each_unkept`], for the fields the store
//! does not keep (a conversion for jq). Values keep an order of their own
//! ([`Placed::ord`]), given when a key is first inserted and kept when its value is
//! replaced, so a table read back from its keys sorts as it was: the parked set is
//! oldest first.

use std::collections::HashSet;
use std::sync::Arc;

use indexmap::IndexMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A value that keeps its place in a [`Tracked`] table.
pub(crate) trait Placed {
    /// Its place: the order it was first inserted in.
    fn ord(&self) -> u64;
    /// Give it its place.
    fn place(&mut self, ord: u64);
}

/// A table by id, in insertion order, with the ids changed since [`Tracked::take_dirty`].
#[derive(Debug)]
pub(crate) struct Tracked<V> {
    items: IndexMap<Arc<str>, Box<V>>,
    dirty: HashSet<Arc<str>>,
    next: u64,
}

impl<V> Default for Tracked<V> {
    fn default() -> Self {
        Self {
            items: IndexMap::new(),
            dirty: HashSet::new(),
            next: 0,
        }
    }
}

impl<V: Placed> Tracked<V> {
    /// A table of `items` read back, sorted by their places; nothing is dirty.
    pub(crate) fn from_items(mut items: Vec<(Arc<str>, Box<V>)>) -> Self {
        items.sort_by_key(|(_, v)| v.ord());
        let next = items.last().map_or(0, |(_, v)| v.ord().saturating_add(1));
        Self {
            items: items.into_iter().collect(),
            dirty: HashSet::new(),
            next,
        }
    }

    /// Insert `value` under `id`: at the end if `id` is new, in its place (and keeping
    /// its order) if not.
    pub(crate) fn insert(&mut self, id: Arc<str>, mut value: Box<V>) -> Option<Box<V>> {
        let ord = match self.items.get(&id) {
            Some(old) => old.ord(),
            None => {
                let ord = self.next;
                self.next = self.next.saturating_add(1);
                ord
            }
        };
        value.place(ord);
        self.dirty.insert(Arc::clone(&id));
        self.items.insert(id, value)
    }

    /// Remove `id`, keeping the others' order.
    pub(crate) fn shift_remove(&mut self, id: &str) -> Option<Box<V>> {
        let (key, value) = self.items.shift_remove_entry(id)?;
        self.dirty.insert(key);
        Some(value)
    }

    /// The value of `id`, to change: `id` is marked.
    pub(crate) fn get_mut(&mut self, id: &str) -> Option<&mut V> {
        let (_, key, value) = self.items.get_full_mut(id)?;
        if !self.dirty.contains(&**key) {
            self.dirty.insert(Arc::clone(key));
        }
        Some(&mut **value)
    }

    /// Every value, to change what the store does not keep: nothing is marked.
    pub(crate) fn for_each_unkept(&mut self, mut f: impl FnMut(&Arc<str>, &mut V)) {
        for (id, value) in &mut self.items {
            f(id, value);
        }
    }

    /// Keep only the values `keep` says to keep (it may change what the store does not
    /// keep); each one removed is marked.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&Arc<str>, &mut V) -> bool) {
        let dirty = &mut self.dirty;
        self.items.retain(|id, value| {
            let kept = keep(id, value);
            if !kept {
                dirty.insert(Arc::clone(id));
            }
            kept
        });
    }

    /// Every id, marked: the whole table is written by the next change.
    pub(crate) fn mark_all(&mut self) {
        self.dirty.extend(self.items.keys().cloned());
    }

    /// Renumber the places in the present order (a table read from a format that kept
    /// none), marking every id.
    pub(crate) fn renumber(&mut self) {
        for (i, value) in self.items.values_mut().enumerate() {
            value.place(i as u64);
        }
        self.next = self.items.len() as u64;
        self.mark_all();
    }
}

impl<V> Tracked<V> {
    /// The value of `id`.
    pub(crate) fn get(&self, id: &str) -> Option<&V> {
        self.items.get(id).map(|v| &**v)
    }

    /// Whether `id` is held.
    pub(crate) fn contains_key(&self, id: &str) -> bool {
        self.items.contains_key(id)
    }

    /// The values, in order.
    pub(crate) fn values(&self) -> impl Iterator<Item = &Box<V>> {
        self.items.values()
    }

    /// The ids, in order.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &Arc<str>> {
        self.items.keys()
    }

    /// The ids and values, in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&Arc<str>, &Box<V>)> {
        self.items.iter()
    }

    /// How many are held.
    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether none is held.
    pub(crate) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Whether any id changed since the last [`Tracked::take_dirty`].
    pub(crate) fn is_dirty(&self) -> bool {
        !self.dirty.is_empty()
    }

    /// Forget which ids changed.
    pub(crate) fn clear_dirty(&mut self) {
        self.dirty.clear();
    }

    /// The ids changed since the last call, each with its value now (`None`: removed).
    pub(crate) fn take_dirty(&mut self) -> Vec<(Arc<str>, Option<&V>)> {
        let dirty = std::mem::take(&mut self.dirty);
        let mut changed: Vec<(Arc<str>, Option<&V>)> = dirty
            .into_iter()
            .map(|id| {
                let value = self.items.get(&id).map(|v| &**v);
                (id, value)
            })
            .collect();
        // In id order, so a batch is the same whatever the set's hashing.
        changed.sort_by(|a, b| a.0.cmp(&b.0));
        changed
    }
}

/// Packed as the table itself (each value carries its place); nothing is dirty after.
impl<V: Serialize> Serialize for Tracked<V> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.items.serialize(serializer)
    }
}

impl<'de, V: Deserialize<'de> + Placed> Deserialize<'de> for Tracked<V> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let items = IndexMap::<Arc<str>, Box<V>>::deserialize(deserializer)?;
        let next = items
            .values()
            .map(|v| v.ord().saturating_add(1))
            .max()
            .unwrap_or(0);
        Ok(Self {
            items,
            dirty: HashSet::new(),
            next,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct V(u64, String);

    impl Placed for V {
        fn ord(&self) -> u64 {
            self.0
        }
        fn place(&mut self, ord: u64) {
            self.0 = ord;
        }
    }

    fn v(text: &str) -> Box<V> {
        Box::new(V(0, text.to_owned()))
    }

    fn table(ids: &[&str]) -> Tracked<V> {
        let mut t = Tracked::default();
        for id in ids {
            t.insert(Arc::from(*id), v(id));
        }
        t
    }

    fn dirty(t: &mut Tracked<V>) -> Vec<(String, bool)> {
        t.take_dirty()
            .into_iter()
            .map(|(id, v)| (id.to_string(), v.is_some()))
            .collect()
    }

    fn places(t: &Tracked<V>) -> Vec<(String, u64)> {
        t.iter().map(|(id, v)| (id.to_string(), v.0)).collect()
    }

    #[test]
    fn every_change_is_marked_and_taken_once() {
        let mut t = table(&["b", "a"]);
        assert_eq!(dirty(&mut t), [("a".into(), true), ("b".into(), true)]);
        assert!(!t.is_dirty());
        t.get_mut("a").unwrap().1 = "changed".into();
        t.shift_remove("b");
        let _ = t.get("a");
        t.for_each_unkept(|_, v| v.1.push('!'));
        assert_eq!(dirty(&mut t), [("a".into(), true), ("b".into(), false)]);
        assert!(dirty(&mut t).is_empty());
    }

    #[test]
    fn places_hold_across_replacing_removing_reading_back_and_packing() {
        let mut t = table(&["x", "y", "z"]);
        t.shift_remove("x");
        t.insert(Arc::from("y"), v("y again"));
        t.insert(Arc::from("w"), v("w"));
        assert_eq!(
            places(&t),
            [("y".into(), 1), ("z".into(), 2), ("w".into(), 3)]
        );
        // Read back from the store's keys, in another order.
        let mut items: Vec<_> = t
            .iter()
            .map(|(id, v)| (Arc::clone(id), Box::new(V(v.0, v.1.clone()))))
            .collect();
        items.reverse();
        let back = Tracked::from_items(items);
        assert_eq!(places(&back), places(&t));
        // Packed and unpacked: a new key still goes after every kept place.
        let text = serde_json::to_string(&back).unwrap();
        let mut unpacked: Tracked<V> = serde_json::from_str(&text).unwrap();
        assert!(!unpacked.is_dirty());
        unpacked.insert(Arc::from("v"), v("v"));
        assert_eq!(unpacked.get("v").unwrap().0, 4);
    }
}
