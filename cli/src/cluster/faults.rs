//! The faults' schedule: one fault at a time, seeded, each lasting past a lease where
//! it should, with a pause of one to three leases between two.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::client::Client;
use super::nodes::{Node, Setup};

/// A fault the harness makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fault {
    /// `kill -9` a node; start it again half a lease to two leases later.
    Kill,
    /// `SIGSTOP` a node for one and a half to three leases, then `SIGCONT`.
    Freeze,
    /// Cut a node off from the database for one and a half to three leases.
    Cut,
    /// Restart the database with the command given.
    RestartDatabase,
}

impl Fault {
    /// Every fault, by its name on the command line.
    pub const ALL: [(&'static str, Fault); 4] = [
        ("kill", Fault::Kill),
        ("freeze", Fault::Freeze),
        ("cut", Fault::Cut),
        ("restart-database", Fault::RestartDatabase),
    ];

    /// Its name.
    pub fn name(self) -> &'static str {
        Fault::ALL
            .iter()
            .find(|(_, f)| *f == self)
            .map_or("?", |(name, _)| name)
    }
}

/// How long the database's restart command may take.
const RESTART_TIMEOUT: Duration = Duration::from_secs(60);

/// What the schedule is told.
pub(crate) struct Schedule {
    pub(crate) faults: Vec<Fault>,
    pub(crate) seed: u64,
    pub(crate) lease: Duration,
    pub(crate) restart_database: Option<String>,
    pub(crate) setup: Setup,
}

/// What the schedule did.
#[derive(Default)]
pub(crate) struct Done {
    /// Each fault: what, which node, when.
    pub(crate) happened: Vec<String>,
    /// Nodes that ended of themselves, commands that failed.
    pub(crate) problems: Vec<String>,
}

impl Schedule {
    /// Make faults until `until`; each ends (the node started again, thawed, the cut
    /// healed) before the next begins.
    pub(crate) async fn run(
        self,
        nodes: Arc<tokio::sync::Mutex<Vec<Node>>>,
        client: Client,
        until: tokio::time::Instant,
    ) -> Done {
        let mut done = Done::default();
        let began = Instant::now();
        if self.faults.is_empty() {
            tokio::time::sleep_until(until).await;
            return done;
        }
        let mut rng = SmallRng::seed_from_u64(self.seed.wrapping_mul(0x5851_F42D_4C95_7F2D));
        let leases =
            |rng: &mut SmallRng, from: f64, to: f64| self.lease.mul_f64(rng.random_range(from..to));
        loop {
            let pause = leases(&mut rng, 1.0, 3.0);
            if tokio::time::Instant::now() + pause >= until {
                tokio::time::sleep_until(until).await;
                return done;
            }
            tokio::time::sleep(pause).await;
            let fault = self.faults[rng.random_range(0..self.faults.len())];
            let mut all = nodes.lock().await;
            done.problems
                .extend(ended(&mut all, &self.setup, &client).await);
            let index = rng.random_range(0..all.len());
            let at = began.elapsed().as_secs_f64();
            let node = &mut all[index];
            match fault {
                Fault::Kill => {
                    let down = leases(&mut rng, 0.5, 2.0);
                    done.happened.push(format!(
                        "{at:.1}s: kill -9 {}, started again {:.1}s later",
                        node.name,
                        down.as_secs_f64()
                    ));
                    node.kill();
                    tokio::time::sleep(down).await;
                    if let Err(e) = restart(node, &self.setup, &client).await {
                        done.problems.push(e);
                    }
                }
                Fault::Freeze => {
                    let frozen = leases(&mut rng, 1.5, 3.0);
                    done.happened.push(format!(
                        "{at:.1}s: SIGSTOP {} for {:.1}s",
                        node.name,
                        frozen.as_secs_f64()
                    ));
                    node.freeze();
                    tokio::time::sleep(frozen).await;
                    node.thaw();
                }
                Fault::Cut => {
                    let cut = leases(&mut rng, 1.5, 3.0);
                    done.happened.push(format!(
                        "{at:.1}s: {} cut off from the database for {:.1}s",
                        node.name,
                        cut.as_secs_f64()
                    ));
                    node.proxy.cut(true);
                    tokio::time::sleep(cut).await;
                    node.proxy.cut(false);
                }
                Fault::RestartDatabase => {
                    done.happened
                        .push(format!("{at:.1}s: the database restarted"));
                    let command = self.restart_database.clone().unwrap_or_default();
                    if let Err(e) = restart_database(&command).await {
                        done.problems.push(e);
                    }
                }
            }
        }
    }
}

/// Start `node` again and wait until it answers.
async fn restart(node: &mut Node, setup: &Setup, client: &Client) -> Result<(), String> {
    node.start(setup)?;
    node.ready(client.http()).await
}

/// Nodes whose process ended of itself (each a problem), started again.
async fn ended(nodes: &mut [Node], setup: &Setup, client: &Client) -> Vec<String> {
    let mut problems = Vec::new();
    for node in nodes {
        if let Some(status) = node.exited() {
            problems.push(format!(
                "{} ended of itself ({status}); see {}",
                node.name,
                node.log(&setup.dir).display()
            ));
            if let Err(e) = restart(node, setup, client).await {
                problems.push(e);
            }
        }
    }
    problems
}

/// Everything healed once the faults are over: every node thawed, every cut healed,
/// every node that is down started again.
pub(crate) async fn heal(nodes: &mut [Node], setup: &Setup, client: &Client) -> Vec<String> {
    for node in nodes.iter_mut() {
        if node.frozen {
            node.thaw();
        }
        node.proxy.cut(false);
    }
    let mut problems = ended(nodes, setup, client).await;
    for node in nodes.iter_mut() {
        if !node.running()
            && let Err(e) = restart(node, setup, client).await
        {
            problems.push(e);
        }
    }
    problems
}

/// Run the database's restart command.
async fn restart_database(command: &str) -> Result<(), String> {
    let run = tokio::process::Command::new("sh")
        .args(["-c", command])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .output();
    match tokio::time::timeout(RESTART_TIMEOUT, run).await {
        Ok(Ok(out)) if out.status.success() => Ok(()),
        Ok(Ok(out)) => Err(format!(
            "the database's restart command failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Ok(Err(e)) => Err(format!("the database's restart command: {e}")),
        Err(_) => Err(format!(
            "the database's restart command took more than {}s",
            RESTART_TIMEOUT.as_secs()
        )),
    }
}
