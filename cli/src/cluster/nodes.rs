//! The nodes: `parkway serve` processes on one database, each behind its own proxy,
//! started, killed, frozen, thawed and stopped by the harness.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::proxy::Proxy;

/// How long a node may take to answer `GET /healthz` once started.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a node may take to stop once sent `SIGTERM`.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// The token every node takes, with the scopes the client needs.
pub(crate) const TOKEN: &str = "cluster-harness-token-0123456789";

/// What every node is started with.
#[derive(Debug, Clone)]
pub(crate) struct Setup {
    /// The `parkway` program.
    pub(crate) program: PathBuf,
    /// The targets file.
    pub(crate) targets: PathBuf,
    /// The node's lease.
    pub(crate) lease: Duration,
    /// Where the logs go.
    pub(crate) dir: PathBuf,
}

/// One node.
pub(crate) struct Node {
    /// Its name: `n1`, `n2`, …
    pub(crate) name: String,
    /// Where it listens: `http://127.0.0.1:PORT`.
    pub(crate) url: String,
    /// Its listening address.
    listen: String,
    /// The database's URL as this node reaches it, through its proxy.
    database: String,
    /// Its proxy.
    pub(crate) proxy: Proxy,
    /// Its process, while one runs.
    child: Option<Child>,
    /// Whether it is stopped with `SIGSTOP`.
    pub(crate) frozen: bool,
    /// How many processes it has had.
    pub(crate) starts: u64,
}

impl Node {
    /// A node named `name`, listening on `port`, reaching the database through `proxy`
    /// at `database`; not started.
    pub(crate) fn new(name: String, port: u16, proxy: Proxy, database: String) -> Node {
        Node {
            url: format!("http://127.0.0.1:{port}"),
            listen: format!("127.0.0.1:{port}"),
            name,
            database,
            proxy,
            child: None,
            frozen: false,
            starts: 0,
        }
    }

    /// Its log file.
    pub(crate) fn log(&self, dir: &Path) -> PathBuf {
        dir.join(format!("{}.log", self.name))
    }

    /// Start a process of it, its output appended to its log.
    pub(crate) fn start(&mut self, setup: &Setup) -> Result<(), String> {
        let log = File::options()
            .create(true)
            .append(true)
            .open(self.log(&setup.dir))
            .map_err(|e| format!("{}'s log: {e}", self.name))?;
        let err = log
            .try_clone()
            .map_err(|e| format!("{}'s log: {e}", self.name))?;
        let child = Command::new(&setup.program)
            .arg("serve")
            .args(["--postgres", &self.database])
            .args(["--node", &self.name])
            .args([
                "--lease",
                &humantime::format_duration(setup.lease).to_string(),
            ])
            .args(["--listen", &self.listen])
            .arg("--targets")
            .arg(&setup.targets)
            .arg("--audit-writes")
            .env("PARKWAY_TOKENS", format!("{TOKEN} admin,visit"))
            .env("INTERACTIONS_MAX_CONCURRENT_CALLER", "1000000")
            .env_remove("PARKWAY_DATA_DIR")
            .env_remove("PARKWAY_POSTGRES_URL")
            .env_remove("PARKWAY_NODE")
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", self.name))?;
        self.child = Some(child);
        self.frozen = false;
        self.starts += 1;
        Ok(())
    }

    /// Wait until it answers `GET /healthz`, or say why not.
    pub(crate) async fn ready(&mut self, client: &reqwest::Client) -> Result<(), String> {
        let deadline = tokio::time::Instant::now() + START_TIMEOUT;
        let url = format!("{}/healthz", self.url);
        loop {
            if let Some(status) = self.exited() {
                return Err(format!("{} exited while starting: {status}", self.name));
            }
            let answered = client
                .get(&url)
                .timeout(Duration::from_secs(2))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            if answered {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(format!(
                    "{} did not answer /healthz within {}s",
                    self.name,
                    START_TIMEOUT.as_secs()
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// If its process ended, how.
    pub(crate) fn exited(&mut self) -> Option<String> {
        let child = self.child.as_mut()?;
        match child.try_wait() {
            Ok(Some(status)) => {
                self.child = None;
                Some(status.to_string())
            }
            Ok(None) => None,
            Err(e) => Some(format!("cannot be waited for: {e}")),
        }
    }

    /// Whether a process of it runs.
    pub(crate) fn running(&self) -> bool {
        self.child.is_some()
    }

    /// Send `signal` to its process.
    fn signal(&self, signal: libc::c_int) {
        if let Some(child) = &self.child
            && let Ok(pid) = libc::pid_t::try_from(child.id())
        {
            // SAFETY: a plain syscall on a child this harness started and has not
            // waited for, so the pid is still its.
            unsafe {
                libc::kill(pid, signal);
            }
        }
    }

    /// `kill -9` it, and wait for its end.
    pub(crate) fn kill(&mut self) {
        self.signal(libc::SIGKILL);
        if let Some(mut child) = self.child.take() {
            let _ = child.wait();
        }
        self.frozen = false;
    }

    /// Stop it with `SIGSTOP`.
    pub(crate) fn freeze(&mut self) {
        self.signal(libc::SIGSTOP);
        self.frozen = true;
    }

    /// Let it go on with `SIGCONT`.
    pub(crate) fn thaw(&mut self) {
        self.signal(libc::SIGCONT);
        self.frozen = false;
    }

    /// Stop it with `SIGTERM` as an operator would (thawed first); `SIGKILL` past the
    /// timeout. Whether it stopped of itself.
    pub(crate) async fn stop(&mut self) -> bool {
        self.thaw();
        self.signal(libc::SIGTERM);
        let deadline = tokio::time::Instant::now() + STOP_TIMEOUT;
        while self.running() {
            if self.exited().is_some() {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                self.kill();
                return false;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        true
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        // A harness that stops early leaves no process behind.
        self.kill();
    }
}
