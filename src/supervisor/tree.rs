//! The run tree: parent/child links of every run that has not ended, as plain data.
//!
//! Whole-chain cancellation is a walk of this tree: up from the asking run to the top of
//! its chain (or to just below the cancelling run), then down to every descendant of
//! what the walk passed. The tree holds no run state; it only knows links. The
//! subject owning the runs (a chain never leaves its subject) aborts their executing
//! activations when the walk's answer reaches it.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// One run in the tree.
#[derive(Debug, Default)]
struct Node {
    /// The calling run, while it has not ended.
    parent: Option<Arc<str>>,
    /// Runs this run called that have not ended.
    children: Vec<Arc<str>>,
}

/// Every run that has not ended, with its links.
#[derive(Debug, Default)]
pub(crate) struct Tree {
    /// By run id.
    nodes: HashMap<Arc<str>, Node>,
}

impl Tree {
    /// Add `run` under `parent`, a run that has not ended (a top run has none).
    ///
    /// Only chains are linked: a run enters the tree when it is a child or when it calls
    /// its first child, so a parent the tree does not hold yet enters as the top of its
    /// chain.
    pub(crate) fn link(&mut self, run: Arc<str>, parent: Option<Arc<str>>) {
        if let Some(p) = &parent {
            self.nodes
                .entry(Arc::clone(p))
                .or_default()
                .children
                .push(Arc::clone(&run));
        }
        self.nodes.insert(
            run,
            Node {
                parent,
                ..Node::default()
            },
        );
    }

    /// Forget `run`, which ended; its children become tops of their chains.
    pub(crate) fn remove(&mut self, run: &str) {
        let Some(node) = self.nodes.remove(run) else {
            return;
        };
        if let Some(p) = &node.parent
            && let Some(parent) = self.nodes.get_mut(p)
        {
            parent.children.retain(|c| &**c != run);
        }
        for child in node.children {
            if let Some(c) = self.nodes.get_mut(&child) {
                c.parent = None;
            }
        }
    }

    /// The runs a cancel of a park raised by `run` tears down: `run` and every run above
    /// it up to the top of its chain, stopping below `canceller` when the walk meets it,
    /// plus every descendant of those. Oldest ancestor last.
    ///
    /// The canceller is spared only when the park was raised below it. A canceller that
    /// the upward walk does not meet, but that descends from a run it passes, is torn down
    /// with the rest.
    pub(crate) fn chain(&self, run: &str, canceller: Option<&str>) -> Vec<Arc<str>> {
        let mut upward = Vec::new();
        let mut spared = None;
        let mut at = self.nodes.get_key_value(run).map(|(k, _)| Arc::clone(k));
        while let Some(id) = at {
            if canceller == Some(&*id) {
                spared = Some(id);
                break;
            }
            at = self.nodes.get(&id).and_then(|n| n.parent.clone());
            upward.push(id);
        }
        let mut seen: HashSet<Arc<str>> = upward.iter().cloned().collect();
        let mut order = upward.clone();
        let mut stack = upward;
        while let Some(id) = stack.pop() {
            if let Some(node) = self.nodes.get(&id) {
                for child in &node.children {
                    if spared.as_ref() != Some(child) && seen.insert(Arc::clone(child)) {
                        order.push(Arc::clone(child));
                        stack.push(Arc::clone(child));
                    }
                }
            }
        }
        order
    }

    /// How many runs the tree holds.
    pub(crate) fn len(&self) -> usize {
        self.nodes.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(links: &[(&str, Option<&str>)]) -> Tree {
        let mut t = Tree::default();
        for (run, parent) in links {
            t.link(Arc::from(*run), parent.map(Arc::from));
        }
        t
    }

    fn names(v: Vec<Arc<str>>) -> Vec<String> {
        let mut v: Vec<String> = v.iter().map(|s| s.to_string()).collect();
        v.sort();
        v
    }

    #[test]
    fn chain_walks_to_the_top_and_down_to_descendants() {
        // a -> b -> c, and b -> d (a sibling of c under b), e unrelated.
        let t = tree(&[
            ("a", None),
            ("b", Some("a")),
            ("c", Some("b")),
            ("d", Some("b")),
            ("e", None),
        ]);
        assert_eq!(names(t.chain("c", None)), ["a", "b", "c", "d"]);
    }

    #[test]
    fn chain_stops_below_the_canceller() {
        let t = tree(&[("a", None), ("b", Some("a")), ("c", Some("b"))]);
        assert_eq!(names(t.chain("c", Some("a"))), ["b", "c"]);
        // A canceller outside the chain does not stop it.
        assert_eq!(names(t.chain("c", Some("zz"))), ["a", "b", "c"]);
    }

    #[test]
    fn a_canceller_that_is_not_above_the_park_is_torn_down_too() {
        // a calls b (which parked), then k, which cancels b's park: k descends from a.
        let t = tree(&[("a", None), ("b", Some("a")), ("k", Some("a"))]);
        assert_eq!(names(t.chain("b", Some("k"))), ["a", "b", "k"]);
        // Below the canceller, its own subtree other than the park's chain still goes
        // only where the walk passes: a sibling of the canceller survives.
        let t = tree(&[
            ("a", None),
            ("k", Some("a")),
            ("b", Some("k")),
            ("s", Some("a")),
        ]);
        assert_eq!(names(t.chain("b", Some("k"))), ["b"]);
    }

    #[test]
    fn an_ended_parent_is_no_link() {
        let mut t = tree(&[("a", None), ("b", Some("a"))]);
        t.remove("a");
        assert_eq!(names(t.chain("b", None)), ["b"]);
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn a_parent_enters_the_tree_with_its_first_child() {
        // `a` was never linked on its own: its first child brings it in as a top.
        let mut t = tree(&[("b", Some("a")), ("c", Some("a"))]);
        assert_eq!(t.len(), 3);
        assert_eq!(names(t.chain("b", None)), ["a", "b", "c"]);
        t.remove("b");
        t.remove("c");
        t.remove("a");
        assert_eq!(t.len(), 0);
    }
}
