//! `parkway serve`: the HTTP face, and the MCP face at `/mcp`, over a data directory or a
//! PostgreSQL database, with scripted targets from a file.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use axum::Router;
use parkway::sim::{Notes, Scenario, ScenarioError, Scripts};
use parkway::{ManualClock, Runtime};
use parkway_http::{Options, Scope, TestMode, Tokens, router, test_router};

use crate::mcp::remote;

/// `parkway serve` arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The data directory (else `PARKWAY_DATA_DIR`; with neither, the runtime runs in
    /// memory and keeps nothing across a restart).
    #[arg(long)]
    data: Option<PathBuf>,
    /// Keep the runtime's state in this PostgreSQL database instead of a data directory
    /// (`postgres://user:password@host:port/db`; else `PARKWAY_POSTGRES_URL`;
    /// docs/postgres.md). Several processes share one as nodes of different names
    /// (`--node`).
    #[arg(long, value_name = "URL", conflicts_with_all = ["data", "test_scenario"])]
    postgres: Option<String>,
    /// This process's node name among those sharing the database (else `PARKWAY_NODE`,
    /// else `default`): 1 to 64 letters, digits, `-`, `_` or `.`, one process per name
    /// (docs/postgres.md, "Several nodes").
    #[arg(long, value_name = "NAME", conflicts_with_all = ["data", "test_scenario"])]
    node: Option<String>,
    /// How long the node's leases on its slots last (default 15s, from 1s to 1h): a node
    /// that dies has its slots served by the others once they end.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, conflicts_with_all = ["data", "test_scenario"])]
    lease: Option<std::time::Duration>,
    /// Where the other nodes sharing the database send the requests for this node's
    /// subjects (`http://host:port`; default: the address it listens on, unless that is
    /// `0.0.0.0` or `::`, where this must be given for requests to be forwarded here).
    #[arg(long, value_name = "URL", conflicts_with_all = ["data", "test_scenario"])]
    advertise: Option<String>,
    /// Audit every write in the database: a row per slot of each group commit in
    /// `parkway_audit`, which `parkway cluster` reads to check that no slot was written
    /// by two owners at once. For tests: it costs a row per slot written.
    #[arg(long, requires = "postgres")]
    audit_writes: bool,
    /// Cut the data directory's journal at the damage and open, if it is damaged before
    /// its end, rather than refuse (what is dropped is logged, and kept in the
    /// directory's `dropped/`; docs/durability.md, "Damaged journals").
    #[arg(long, conflicts_with = "test_scenario")]
    truncate_damaged_journal: bool,
    /// The address to listen on (`127.0.0.1:0` picks a free port; the address is
    /// printed once bound).
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// A targets file: scripted targets and doors, in the scenario format
    /// (`docs/http.md`). Its doors are saved at start, replacing any of the same name.
    #[arg(long)]
    targets: Option<PathBuf>,
    /// A file of bearer tokens with their scopes, one per line (`TOKEN admin,visit`);
    /// else `PARKWAY_TOKENS_FILE`, else the list in `PARKWAY_TOKENS`.
    #[arg(long)]
    tokens: Option<PathBuf>,
    /// Test mode, never for a server anyone relies on: the runtime a simulation
    /// scenario describes (its settings and targets, sequential ids) on a manual clock,
    /// with `POST /v1/test/clock` and `POST /v1/test/settle` (docs/http.md). The
    /// scenario's doors and timeline are left to the client. Replaces --targets.
    #[arg(long, value_name = "SCENARIO", conflicts_with = "targets")]
    test_scenario: Option<PathBuf>,
    /// In test mode, the clock's reading at start (RFC 3339; default the scenario's
    /// start): a client restarting the server passes the time it had reached.
    #[arg(long, value_name = "TIME", requires = "test_scenario")]
    test_now: Option<String>,
    /// How long a client has to send a request's line and headers whole: from the
    /// connection's start, and from the first byte of each later request on it.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = humantime::parse_duration)]
    header_read_timeout: Duration,
    /// How long a kept-alive connection with no request in flight stays open (a long
    /// poll or a stream is a request in flight, never idle).
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = humantime::parse_duration)]
    idle_timeout: Duration,
    /// The most connections open at once; at the cap a new one closes the one waiting
    /// longest with no request in flight. Default 512, or fewer to stay 128 below the
    /// process's open-file limit.
    #[arg(long, value_name = "N")]
    max_connections: Option<usize>,
    /// Grant these scopes (separated by commas, e.g. `visit`) to requests that send no
    /// token: for local use and test clients only, never for a server anyone else can
    /// reach. Logged loudly at start. A request with a wrong token is still refused.
    #[arg(long, value_name = "SCOPES")]
    anonymous_scopes: Option<String>,
    #[command(flatten)]
    mcp: crate::mcp::Face,
}

/// File descriptors left for everything but connections: the data directory's files,
/// the listener, the standard streams.
const RESERVED_FILES: u64 = 128;

/// The server's options from the flags: every problem named.
fn options(args: &Args) -> Result<Options, String> {
    let mut problems = Vec::new();
    if args.header_read_timeout.is_zero() {
        problems.push("--header-read-timeout must be more than 0".to_owned());
    }
    if args.idle_timeout.is_zero() {
        problems.push("--idle-timeout must be more than 0".to_owned());
    }
    if args.max_connections == Some(0) {
        problems.push("--max-connections must be at least 1".to_owned());
    }
    if !problems.is_empty() {
        return Err(problems.join("; "));
    }
    let mut options = Options::default();
    options.header_read_timeout = args.header_read_timeout;
    options.idle_timeout = args.idle_timeout;
    match (args.max_connections, open_file_limit()) {
        (Some(n), _) => options.max_connections = n,
        (None, Some(limit)) if limit < options.max_connections as u64 + RESERVED_FILES => {
            let fit = limit.saturating_sub(RESERVED_FILES).max(1);
            options.max_connections = usize::try_from(fit).unwrap_or(1);
            eprintln!(
                "parkway serve: at most {} connections, to stay {RESERVED_FILES} below the open-file limit ({limit})",
                options.max_connections
            );
        }
        (None, _) => {}
    }
    Ok(options)
}

/// The process's soft limit of open files, where there is one.
#[cfg(unix)]
fn open_file_limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct it is given, nothing else.
    let read = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    (read == 0 && limit.rlim_cur != libc::RLIM_INFINITY).then_some(limit.rlim_cur)
}

#[cfg(not(unix))]
fn open_file_limit() -> Option<u64> {
    None
}

/// Run `parkway serve`.
pub(crate) fn main(args: Args) -> ExitCode {
    crate::log::log_to_stderr();
    // Test mode plays a scenario as `parkway sim` does, on one thread: messages sent
    // together (the timers due at one instant) reach their actors before any of them
    // runs, so their events reach the log in one order, and a transcript, which compares
    // a step's events in order, does not depend on thread timing.
    let mut builder = match args.test_scenario {
        Some(_) => tokio::runtime::Builder::new_current_thread(),
        None => tokio::runtime::Builder::new_multi_thread(),
    };
    let runtime = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("parkway serve: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("parkway serve: {message}");
            ExitCode::FAILURE
        }
    }
}

/// The tokens, from the flag's file, `PARKWAY_TOKENS_FILE` or `PARKWAY_TOKENS`, with the
/// scopes granted to requests without one.
fn tokens(flag: Option<&PathBuf>, anonymous: Option<&str>) -> Result<Tokens, String> {
    let anonymous = match anonymous {
        None => Vec::new(),
        Some(text) => {
            let scopes =
                Tokens::parse_scopes(text).map_err(|e| format!("--anonymous-scopes: {e}"))?;
            if scopes.is_empty() {
                return Err("--anonymous-scopes names no scope".to_owned());
            }
            scopes
        }
    };
    if !anonymous.is_empty() {
        let names: Vec<&str> = anonymous.iter().map(|s| s.name()).collect();
        eprintln!(
            "parkway serve: WARNING: requests without a token have the scopes {}: anyone \
             who can reach this server may use them (--anonymous-scopes)",
            names.join(",")
        );
    }
    if flag.is_none()
        && !anonymous.is_empty()
        && std::env::var_os("PARKWAY_TOKENS_FILE").is_none()
        && std::env::var_os("PARKWAY_TOKENS").is_none()
    {
        return Ok(Tokens::none().anonymous(&anonymous));
    }
    Ok(named_tokens(flag)?.anonymous(&anonymous))
}

/// The tokens, from the flag's file, `PARKWAY_TOKENS_FILE` or `PARKWAY_TOKENS`.
fn named_tokens(flag: Option<&PathBuf>) -> Result<Tokens, String> {
    let from_file = |path: &PathBuf| {
        std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the tokens file {}: {e}", path.display()))
    };
    let (text, source) = match (
        flag,
        std::env::var_os("PARKWAY_TOKENS_FILE"),
        std::env::var("PARKWAY_TOKENS"),
    ) {
        (Some(path), _, _) => (from_file(path)?, format!("{}", path.display())),
        (None, Some(path), _) => {
            let path = PathBuf::from(path);
            (from_file(&path)?, format!("{}", path.display()))
        }
        (None, None, Ok(list)) => (list, "PARKWAY_TOKENS".to_owned()),
        (None, None, Err(_)) => {
            return Err(
                "no tokens: give --tokens FILE, PARKWAY_TOKENS_FILE or PARKWAY_TOKENS (see docs/http.md)"
                    .to_owned(),
            );
        }
    };
    let tokens = Tokens::parse(&text).map_err(|e| format!("{source}: {e}"))?;
    if tokens.is_empty() {
        return Err(format!("{source} lists no token"));
    }
    Ok(tokens)
}

/// `what` at `path`, read and parsed by `parse`; every problem named.
fn read<T>(
    path: &PathBuf,
    what: &str,
    parse: fn(&str) -> Result<T, ScenarioError>,
) -> Result<T, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {what} {}: {e}", path.display()))?;
    parse(&text).map_err(|e| {
        format!(
            "{what} {} is invalid:\n  {}",
            path.display(),
            e.problems.join("\n  ")
        )
    })
}

/// The runtime and router of test mode, from the scenario file.
async fn test_mode(
    args: &Args,
    path: &PathBuf,
    tokens: Tokens,
    options: Options,
) -> Result<(Runtime, Router), String> {
    let scenario = read(path, "the scenario", Scenario::from_json)?;
    let start = match &args.test_now {
        None => scenario.start,
        Some(text) => chrono::DateTime::parse_from_rfc3339(text)
            .map_err(|e| format!("--test-now {text:?} is not an RFC 3339 instant: {e}"))?
            .with_timezone(&chrono::Utc),
    };
    let clock = ManualClock::at(start);
    let notes = Notes::default();
    let runtime = scenario
        .builder(&clock, &notes, args.data.as_deref())
        .build()
        .await
        .map_err(|e| e.to_string())?;
    eprintln!(
        "parkway serve: TEST MODE: scenario {}, on a manual clock at {start}; \
         /v1/test/clock moves it",
        scenario.name
    );
    let mcp = mcp_routes(args, &runtime, tokens.clone())?;
    let app = test_router(runtime.clone(), tokens, options, TestMode { clock, notes }).merge(mcp);
    Ok((runtime, app))
}

async fn serve(args: Args) -> Result<(), String> {
    let options = options(&args)?;
    let tokens = tokens(args.tokens.as_ref(), args.anonymous_scopes.as_deref())?;
    let shutdown = options.shutdown.clone();
    // Bound first: a node gives the others the address it listens on.
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", args.listen))?;
    let bound = listener
        .local_addr()
        .map_err(|e| format!("cannot read the bound address: {e}"))?;
    let (runtime, app) = match &args.test_scenario {
        Some(path) => test_mode(&args, path, tokens, options.clone()).await?,
        None => plain(&args, bound, tokens, options.clone()).await?,
    };
    eprintln!("parkway serve: listening on http://{bound}");
    let watched = runtime.clone();
    tokio::spawn(async move {
        tokio::select! {
            () = stop_signal() => {}
            // The runtime stopped by itself (its store failed): nothing more can be
            // served, so the process ends, and whatever supervises it starts it again.
            () = watched.stopped() => {}
        }
        // Stops accepting, and ends the streams, which never end on their own.
        shutdown.begin();
    });
    parkway_http::serve(listener, app, &options).await;
    let failure = runtime.store_failure();
    runtime.shutdown().await;
    eprintln!("parkway serve: stopped");
    match failure {
        None => Ok(()),
        Some(failure) => Err(format!(
            "the runtime stopped because its store failed ({failure}): start it again"
        )),
    }
}

/// The runtime and router of a plain server: the data directory, the targets file.
async fn plain(
    args: &Args,
    bound: SocketAddr,
    tokens: Tokens,
    options: Options,
) -> Result<(Runtime, Router), String> {
    let scripts = match &args.targets {
        None => None,
        Some(path) => Some(read(path, "the targets file", Scripts::from_json)?),
    };
    let mut builder = Runtime::builder().truncate_damaged_journal(args.truncate_damaged_journal);
    if let Some(dir) = &args.data {
        builder = builder.data_dir(dir);
    }
    if let Some(url) = &args.postgres {
        builder = builder.postgres(url);
    }
    if let Some(node) = &args.node {
        builder = builder.node(node);
    }
    if let Some(lease) = args.lease {
        builder = builder.lease(lease);
    }
    if args.audit_writes {
        builder = builder.write_audit(true);
    }
    // The other nodes send this one the requests for its subjects: at the address
    // given, else the one it listens on (unless that is every interface's, which names
    // no host they could reach).
    let address = args.advertise.clone().or_else(|| {
        let database = args.postgres.is_some()
            || (args.data.is_none()
                && std::env::var_os("PARKWAY_POSTGRES_URL").is_some_and(|url| !url.is_empty()));
        (database && !bound.ip().is_unspecified()).then(|| format!("http://{bound}"))
    });
    if let Some(address) = address {
        builder = builder.node_address(address);
    }
    if let Some(scripts) = &scripts {
        builder = scripts.register_with(builder, Some(remote(scripts)));
    }
    let runtime = builder.build().await.map_err(|e| e.to_string())?;
    if let Some(scripts) = &scripts {
        for door in &scripts.doors {
            runtime.save_door(door.clone()).map_err(|e| e.to_string())?;
        }
    }
    let mcp = mcp_routes(args, &runtime, tokens.clone())?;
    let app = router(runtime.clone(), tokens, options).merge(mcp);
    Ok((runtime, app))
}

/// The MCP face at `/mcp`, behind the tokens: a tool call is a visit.
fn mcp_routes(args: &Args, runtime: &Runtime, tokens: Tokens) -> Result<Router, String> {
    let data = args
        .data
        .clone()
        .or_else(|| std::env::var_os("PARKWAY_DATA_DIR").map(PathBuf::from));
    let options = args.mcp.options(data.as_deref())?;
    let routes = parkway_mcp::router(runtime.clone(), options).map_err(|e| e.to_string())?;
    Ok(parkway_http::guarded(routes, tokens, Scope::Visit))
}

/// Ctrl-C or SIGTERM.
async fn stop_signal() {
    let interrupt = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {}
        () = terminate => {}
    }
}
