//! Where the servers' logs go.

/// Log to standard error, warnings and errors by default (`RUST_LOG` otherwise): the
/// runtime logs every platform event at `info`, several lines a visit, which a server
/// under load cannot afford to write. Colours only on a terminal.
pub(crate) fn log_to_stderr() {
    use std::io::IsTerminal;
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                // The MCP SDK logs each error it answers a client with at `warn`: a
                // client's mistake, not the server's.
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,rmcp::service=error")),
        )
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .init();
}
