//! Regressions found by the random simulation: each replays the seed that found it.

use parkway::sim::{RandomConfig, random};

/// Seed 17 hung `settle`: a run actor torn down by a caller's expiry while it waited to
/// hand its `Ended` message to a subject that was passivating. Dropping the send's
/// future left its in-flight unit counted forever. The unit is now given back when a
/// send is dropped before its message reaches a mailbox.
#[tokio::test]
async fn seed_17_a_torn_down_sender_does_not_leave_settle_waiting() {
    let config = RandomConfig::new(17, 300, 4);
    let report = tokio::time::timeout(std::time::Duration::from_secs(60), random(&config))
        .await
        .expect("the workload settles after every step")
        .expect("the runtime builds");
    assert_eq!(report.failure, None);
    assert_eq!(report.ops_run, 300);
}

/// Seeds 5, 10, 13 and 18 showed a group only partly admitted under the ceiling: the
/// run parks on the asks admitted, and a resume replays it into a fresh ask, which the
/// ceiling may refuse again. The model now leaves that next outcome unpredicted.
#[tokio::test]
async fn a_group_cut_short_by_the_ceiling_replays_into_a_fresh_ask() {
    for seed in [5, 10, 13, 18] {
        let report = random(&RandomConfig::new(seed, 300, 4)).await.unwrap();
        assert_eq!(report.failure, None, "seed {seed}");
    }
}
