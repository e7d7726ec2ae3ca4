//! The MCP face on the command line: its options for `parkway serve` (mounted at `/mcp`),
//! and `parkway mcp --stdio`, which serves one local client over standard input and
//! output.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use parkway::Runtime;
use parkway::sim::Scripts;

/// The file of a data directory that keeps the key `requestState` is sealed with, so
/// rounds outlive a restart.
const KEY_FILE: &str = "parkway.mcp-state-key";

/// The MCP face's flags, shared by `parkway serve` and `parkway mcp`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct Face {
    /// A file holding the key `requestState` is sealed with (at least 32 bytes); else
    /// `PARKWAY_MCP_STATE_KEY`, else a key kept in the data directory, else a key for
    /// this process only (rounds then do not outlive a restart).
    #[arg(long, value_name = "FILE")]
    mcp_state_key_file: Option<PathBuf>,
    /// The `Host` values `/mcp` accepts, separated by commas (DNS-rebinding
    /// protection); `*` accepts any. Default: localhost, 127.0.0.1, ::1.
    #[arg(long, value_name = "HOSTS", value_delimiter = ',')]
    mcp_allowed_hosts: Vec<String>,
    /// The browser `Origin` values `/mcp` accepts, with scheme
    /// (`https://app.example.com:443`), separated by commas; a request without an
    /// `Origin` passes. Default: the loopback names on any port.
    #[arg(long, value_name = "ORIGINS", value_delimiter = ',')]
    mcp_allowed_origins: Vec<String>,
}

impl Face {
    /// The face's options for `runtime`, whose data directory is `data` if any.
    pub(crate) fn options(&self, data: Option<&Path>) -> Result<parkway_mcp::Options, String> {
        let key = self.key(data)?;
        let mut options = parkway_mcp::Options::new(key);
        match self.mcp_allowed_hosts.as_slice() {
            [] => {}
            [any] if any == "*" => options.allowed_hosts = Vec::new(),
            hosts => options.allowed_hosts = hosts.to_vec(),
        }
        if !self.mcp_allowed_origins.is_empty() {
            options.allowed_origins = self.mcp_allowed_origins.clone();
        }
        Ok(options)
    }

    fn key(&self, data: Option<&Path>) -> Result<Vec<u8>, String> {
        let checked = |key: Vec<u8>, from: &str| {
            if key.len() < 32 {
                Err(format!(
                    "{from} holds {} bytes; the MCP state key needs at least 32",
                    key.len()
                ))
            } else {
                Ok(key)
            }
        };
        if let Some(path) = &self.mcp_state_key_file {
            let key = std::fs::read(path)
                .map_err(|e| format!("cannot read the MCP state key {}: {e}", path.display()))?;
            return checked(key, &path.display().to_string());
        }
        if let Some(key) = std::env::var_os("PARKWAY_MCP_STATE_KEY") {
            return checked(key.into_encoded_bytes(), "PARKWAY_MCP_STATE_KEY");
        }
        let fresh = || {
            let mut key = vec![0u8; 32];
            rand::Rng::fill(&mut rand::rng(), key.as_mut_slice());
            key
        };
        let Some(dir) = data else {
            eprintln!(
                "parkway: the MCP state key is this process's own: a round answered after a \
                 restart is refused (give --mcp-state-key-file, or --data to keep one there)"
            );
            return Ok(fresh());
        };
        let path = dir.join(KEY_FILE);
        match std::fs::read(&path) {
            Ok(key) => checked(key, &path.display().to_string()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let key = fresh();
                write_private(&path, &key).map_err(|e| {
                    format!("cannot keep the MCP state key in {}: {e}", path.display())
                })?;
                Ok(key)
            }
            Err(e) => Err(format!(
                "cannot read the MCP state key {}: {e}",
                path.display()
            )),
        }
    }
}

/// The caller of other servers' tools for the scripts' `mcp_call` steps.
pub(crate) fn remote(scripts: &Scripts) -> std::sync::Arc<dyn parkway::sim::RemoteTools> {
    std::sync::Arc::new(parkway_mcp::Remote::new(scripts.mcp_servers.clone()))
}

/// Write `bytes` to a new file at `path` that only its owner can read, whole or not at
/// all: written beside it under another name, synced, then renamed into place, so a
/// crash or a full disk midway leaves no short key to be refused at the next start.
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let partial = path.with_extension("partial");
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let written = options.open(&partial).and_then(|mut file| {
        file.write_all(bytes)?;
        file.sync_all()
    });
    if let Err(e) = written.and_then(|()| std::fs::rename(&partial, path)) {
        let _ = std::fs::remove_file(&partial);
        return Err(e);
    }
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

/// `parkway mcp` arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Serve one client over standard input and output (the only transport here;
    /// `parkway serve` serves Streamable HTTP at `/mcp`).
    #[arg(long, required = true)]
    stdio: bool,
    /// The data directory (else `PARKWAY_DATA_DIR`; with neither, the runtime runs in
    /// memory).
    #[arg(long)]
    data: Option<PathBuf>,
    /// A targets file: scripted targets, their tools and doors (`docs/mcp.md`).
    #[arg(long)]
    targets: PathBuf,
    #[command(flatten)]
    face: Face,
}

/// Run `parkway mcp --stdio`. Logs go to standard error: standard output is the
/// protocol's.
pub(crate) fn main(args: Args) -> ExitCode {
    crate::log::log_to_stderr();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("parkway mcp: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("parkway mcp: {message}");
            ExitCode::FAILURE
        }
    }
}

async fn serve(args: Args) -> Result<(), String> {
    let text = std::fs::read_to_string(&args.targets).map_err(|e| {
        format!(
            "cannot read the targets file {}: {e}",
            args.targets.display()
        )
    })?;
    let scripts = Scripts::from_json(&text).map_err(|e| {
        format!(
            "the targets file {} is invalid:\n  {}",
            args.targets.display(),
            e.problems.join("\n  ")
        )
    })?;
    let mut builder = scripts.register_with(Runtime::builder(), Some(remote(&scripts)));
    if let Some(dir) = &args.data {
        builder = builder.data_dir(dir);
    }
    let runtime = builder.build().await.map_err(|e| e.to_string())?;
    for door in &scripts.doors {
        runtime.save_door(door.clone()).map_err(|e| e.to_string())?;
    }
    let data = args
        .data
        .clone()
        .or_else(|| std::env::var_os("PARKWAY_DATA_DIR").map(PathBuf::from));
    let options = args.face.options(data.as_deref())?;
    let served = parkway_mcp::serve_stdio(runtime.clone(), options).await;
    runtime.shutdown().await;
    served.map_err(|e| e.to_string())
}
