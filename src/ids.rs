//! The one source of identifiers.
//!
//! Runs are `r-…`, interactions `i-…`, ask groups `g-…`. [`Ids::sequential`] hands out
//! `r-1`, `i-1`, `g-1`, … in order, which a simulation or a test can predict;
//! [`Ids::random`] draws them from a seeded generator so ids from two processes do not
//! collide. Nothing else in the runtime makes up an id.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::slot::Slot;

/// The kind of an identifier, which is also its prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A run: `r-`.
    Run,
    /// An interaction (a parked entry): `i-`.
    Interaction,
    /// A group of asks raised by one activation: `g-`.
    Group,
}

impl Kind {
    fn prefix(self) -> &'static str {
        match self {
            Kind::Run => "r-",
            Kind::Interaction => "i-",
            Kind::Group => "g-",
        }
    }
}

/// Names a channel a subject's actor holds for its state: the reply to a message, the
/// receiver of a run's next outcome, or a blocked `sync` ask's answer. The state keeps
/// the id and returns it in its effects; the channel never enters the state. Unique
/// within the process, and meaningless outside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct ReplyId(u64);

/// Where identifiers come from.
#[derive(Debug)]
pub struct Ids {
    /// How the next id is made.
    source: Source,
    /// The last reply id made.
    replies: AtomicU64,
}

#[derive(Debug)]
enum Source {
    /// One counter per kind.
    Sequential([AtomicU64; 3]),
    /// A seeded generator; a std mutex because drawing is short and never awaits.
    Random(Mutex<SmallRng>),
}

impl Ids {
    /// `r-1`, `i-1`, `g-1`, … counted per kind: deterministic.
    pub fn sequential() -> Self {
        Self {
            source: Source::Sequential([AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)]),
            replies: AtomicU64::new(0),
        }
    }

    /// 16 hex digits drawn from a generator seeded with `seed` (a run's and an
    /// interaction's after three that name their subject's slot): the same seed gives
    /// the same ids in the same order.
    pub fn random(seed: u64) -> Self {
        Self {
            source: Source::Random(Mutex::new(SmallRng::seed_from_u64(seed))),
            replies: AtomicU64::new(0),
        }
    }

    /// The counters of sequential ids, to be kept durable so that a restart never
    /// issues an id twice; `None` for random ids, which need none.
    pub(crate) fn high_water(&self) -> Option<[u64; 3]> {
        match &self.source {
            Source::Sequential(counters) => {
                Some(std::array::from_fn(|i| counters[i].load(Ordering::Relaxed)))
            }
            Source::Random(_) => None,
        }
    }

    /// After a restart: continue sequential ids past `marks`, the counters kept durable.
    pub(crate) fn raise(&self, marks: [u64; 3]) {
        if let Source::Sequential(counters) = &self.source {
            for (counter, mark) in counters.iter().zip(marks) {
                counter.fetch_max(mark, Ordering::Relaxed);
            }
        }
    }

    /// A fresh id of the given kind; a run's names its slot ([`Ids::run`]).
    pub(crate) fn next(&self, kind: Kind) -> String {
        match &self.source {
            Source::Sequential(counters) => {
                let n = counters[kind as usize].fetch_add(1, Ordering::Relaxed) + 1;
                format!("{}{n}", kind.prefix())
            }
            Source::Random(rng) => {
                let n = draw(rng);
                format!("{}{n:016x}", kind.prefix())
            }
        }
    }

    /// A fresh interaction id for an ask on a subject of `slot`: a random one names the
    /// slot (`i-`, three hex digits of it, sixteen random ones), so any node can tell
    /// where the ask is served from its id alone; a sequential one is `i-1`, `i-2`, ….
    pub(crate) fn interaction(&self, slot: Slot) -> String {
        match &self.source {
            Source::Sequential(_) => self.next(Kind::Interaction),
            Source::Random(rng) => slot.interaction_id(draw(rng)),
        }
    }

    /// A fresh run id for a run on a subject of `slot`: a random one names the slot
    /// (`r-`, three hex digits of it, sixteen random ones), so the run's record is found
    /// from the id alone; a sequential one is `r-1`, `r-2`, … as ever (a runtime with
    /// sequential ids is one process, whose run index finds the slot).
    pub(crate) fn run(&self, slot: Slot) -> String {
        match &self.source {
            Source::Sequential(_) => self.next(Kind::Run),
            Source::Random(rng) => slot.run_id(draw(rng)),
        }
    }
}

/// A number from the seeded generator.
fn draw(rng: &Mutex<SmallRng>) -> u64 {
    match rng.lock() {
        Ok(mut rng) => rng.random(),
        Err(poisoned) => poisoned.into_inner().random(),
    }
}

impl Ids {
    /// A fresh reply id: counted, whatever the source of the other ids.
    pub(crate) fn reply(&self) -> ReplyId {
        ReplyId(self.replies.fetch_add(1, Ordering::Relaxed) + 1)
    }
}

impl Default for Ids {
    /// Random ids from a seed drawn from the operating system.
    fn default() -> Self {
        Self::random(rand::random())
    }
}
