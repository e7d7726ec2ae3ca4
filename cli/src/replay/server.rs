//! A `parkway serve` child in test mode: started on a free port, stopped with SIGTERM as
//! an operator would stop it.

use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// The bearer token the child is given, with every scope.
pub(crate) const TOKEN: &str = "replay-token-0123456789abcdef";

/// How long a server may take to start, or to stop once asked.
const PATIENCE: Duration = Duration::from_secs(30);

/// A running server.
pub(crate) struct Server {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub(crate) base: String,
    /// What it wrote to stderr, for a report when something goes wrong.
    log: Arc<Mutex<Vec<String>>>,
}

impl Server {
    /// Start `exe serve` in test mode on `scenario`, over `data`, its clock at `now`
    /// (the scenario's start when `None`).
    pub(crate) async fn start(
        exe: &Path,
        scenario: &Path,
        data: &Path,
        now: Option<&str>,
    ) -> Result<Server, String> {
        let mut command = Command::new(exe);
        command
            .arg("serve")
            .arg("--test-scenario")
            .arg(scenario)
            .arg("--data")
            .arg(data)
            .args(["--listen", "127.0.0.1:0"]);
        if let Some(now) = now {
            command.args(["--test-now", now]);
        }
        let mut child = command
            .env("PARKWAY_TOKENS", format!("{TOKEN} admin,visit,answer"))
            .env_remove("PARKWAY_TOKENS_FILE")
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start {} serve: {e}", exe.display()))?;
        let stderr = child
            .stderr
            .take()
            .ok_or("the server's stderr is not piped")?;
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = tokio::sync::oneshot::channel();
        let kept = Arc::clone(&log);
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            let mut tx = Some(tx);
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(address) = line.strip_prefix("parkway serve: listening on ")
                    && let Some(tx) = tx.take()
                {
                    let _ = tx.send(address.trim().to_owned());
                }
                if let Ok(mut log) = kept.lock() {
                    log.push(line);
                }
            }
        });
        let base = match tokio::time::timeout(PATIENCE, rx).await {
            Ok(Ok(base)) => base,
            _ => {
                let _ = child.start_kill();
                let _ = child.wait().await;
                let said = log.lock().map(|l| l.join("\n")).unwrap_or_default();
                return Err(format!("the server did not start listening:\n{said}"));
            }
        };
        Ok(Server { child, base, log })
    }

    /// What the server wrote to stderr so far.
    pub(crate) fn log(&self) -> String {
        self.log.lock().map(|l| l.join("\n")).unwrap_or_default()
    }

    /// Ask the server to stop (SIGTERM) and wait until it has.
    pub(crate) async fn stop(mut self) -> Result<(), String> {
        terminate(&mut self.child);
        match tokio::time::timeout(PATIENCE, self.child.wait()).await {
            Ok(Ok(status)) if status.success() => Ok(()),
            Ok(Ok(status)) => Err(format!("the server stopped with {status}:\n{}", self.log())),
            Ok(Err(e)) => Err(format!("cannot wait for the server: {e}")),
            Err(_) => {
                let _ = self.child.start_kill();
                Err(format!("the server did not stop within {PATIENCE:?}"))
            }
        }
    }
}

/// SIGTERM, as an operator stops a server.
#[cfg(unix)]
fn terminate(child: &mut Child) {
    if let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) {
        // SAFETY: kill(2) with a pid this process spawned and has not reaped.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
    }
}

/// Elsewhere, the only stop there is.
#[cfg(not(unix))]
fn terminate(child: &mut Child) {
    let _ = child.start_kill();
}
