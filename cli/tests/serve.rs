//! `parkway serve`'s connection flags reach its server: a silent socket is closed after
//! `--header-read-timeout`, `/metrics` shows `--max-connections`, and bad values are
//! refused by name before anything listens.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const TOKENS: &str = "serve-test-token-000001 admin";
const TOKEN: &str = "serve-test-token-000001";

/// How long the server may take to say where it listens, and a socket to be answered
/// or closed: upper bounds only.
const BOUND: Duration = Duration::from_secs(30);

/// A child process, killed when dropped: a failing test leaves nothing running.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn command(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_parkway"));
    command
        .arg("serve")
        .args(["--listen", "127.0.0.1:0"])
        .args(args)
        .env("PARKWAY_TOKENS", TOKENS)
        .env_remove("PARKWAY_TOKENS_FILE")
        .env_remove("PARKWAY_DATA_DIR")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    command
}

/// Start a server in memory with `args`; the process and the address it bound.
fn serve(args: &[&str]) -> (Killed, String) {
    let (process, address, _) = serve_told(command(args));
    (process, address)
}

/// Start the server `command` runs: the process, the address it bound, and what it says
/// on stderr, whole, once it ends.
fn serve_told(mut command: Command) -> (Killed, String, mpsc::Receiver<Result<String, String>>) {
    let mut process = Killed(command.spawn().expect("parkway serve starts"));
    let stderr = process.0.stderr.take().expect("stderr is piped");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut said = Vec::new();
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if let Some(addr) = line.strip_prefix("parkway serve: listening on http://") {
                let _ = tx.send(Ok(addr.to_owned()));
            }
            said.push(line);
        }
        let _ = tx.send(Err(said.join("\n")));
    });
    match rx.recv_timeout(BOUND) {
        Ok(Ok(address)) => (process, address, rx),
        Ok(Err(said)) => panic!("parkway serve ended without listening:\n{said}"),
        Err(e) => panic!("parkway serve did not say where it listens: {e}"),
    }
}

/// Everything the server sends on `socket` until it closes it (within [`BOUND`]).
fn until_closed(socket: &mut TcpStream) -> String {
    socket.set_read_timeout(Some(BOUND)).expect("a read bound");
    let mut read = Vec::new();
    match socket.read_to_end(&mut read) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(e) => panic!("the server closes the socket within the bound: {e}"),
    }
    String::from_utf8_lossy(&read).into_owned()
}

#[test]
fn the_connection_flags_reach_the_server() {
    let (_server, address) = serve(&[
        "--header-read-timeout",
        "1s",
        "--idle-timeout",
        "1m",
        "--max-connections",
        "4",
    ]);
    let mut silent = TcpStream::connect(&address).expect("connects");
    assert_eq!(until_closed(&mut silent), "", "closed unanswered");

    let mut socket = TcpStream::connect(&address).expect("connects");
    let request = format!(
        "GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n"
    );
    socket.write_all(request.as_bytes()).expect("writes");
    let answer = until_closed(&mut socket);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        answer.lines().any(|l| l == "parkway_connections_limit 4"),
        "{answer}"
    );
    assert!(
        answer
            .lines()
            .any(|l| l == "parkway_connections_timed_out_total{phase=\"head\"} 1"),
        "{answer}"
    );
}

#[test]
fn bad_connection_flags_are_refused_by_name() {
    let ran = command(&[
        "--header-read-timeout",
        "0s",
        "--idle-timeout",
        "0s",
        "--max-connections",
        "0",
    ])
    .output()
    .expect("runs");
    assert_eq!(ran.status.code(), Some(1));
    let said = String::from_utf8_lossy(&ran.stderr);
    for named in [
        "--header-read-timeout must be more than 0",
        "--idle-timeout must be more than 0",
        "--max-connections must be at least 1",
    ] {
        assert!(said.contains(named), "{named} in: {said}");
    }
    assert!(!said.contains("listening"), "{said}");

    let ran = command(&["--idle-timeout", "soon"]).output().expect("runs");
    assert_eq!(ran.status.code(), Some(2), "clap's usage error");
    let said = String::from_utf8_lossy(&ran.stderr);
    assert!(said.contains("--idle-timeout"), "{said}");
}

/// Sends `request` (whole, with `Connection: close`) to `address` and reads the answer.
fn call(address: &str, request: &str) -> String {
    let mut socket = TcpStream::connect(address).expect("connects");
    socket.write_all(request.as_bytes()).expect("writes");
    until_closed(&mut socket)
}

/// A fresh schema of the test server, its connections named after it: the URL and the
/// name.
async fn schema() -> (String, String) {
    let url = std::env::var("PARKWAY_TEST_POSTGRES_URL").expect(
        "PARKWAY_TEST_POSTGRES_URL is not set: this test needs a PostgreSQL server \
         (`bash .ci/test` starts a throwaway one and sets it)",
    );
    let name = format!("parkway_serve_{}_{}", std::process::id(), line!());
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .expect("the test server answers");
    tokio::spawn(connection);
    client
        .batch_execute(&format!(
            "DROP SCHEMA IF EXISTS {name} CASCADE; CREATE SCHEMA {name}"
        ))
        .await
        .expect("a schema is made");
    let separator = if url.contains('?') { '&' } else { '?' };
    (
        format!("{url}{separator}options=-c%20search_path%3D{name}&application_name={name}"),
        name,
    )
}

/// A server whose store failed (here: its connections ended and another process took
/// its node over in the database) cannot serve again: it stops by itself and exits with
/// status 1, naming the failure, so that whatever supervises it starts it again.
#[test]
fn a_server_whose_store_failed_exits_so_it_is_started_again() {
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime for the test's own database calls");
    let (url, name) = tokio.block_on(schema());
    let targets = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../examples/serve/load-targets.json"
    );
    let mut server = command(&["--postgres", &url, "--node", "n1", "--targets", targets]);
    server.env("PARKWAY_TOKENS", format!("{TOKEN} admin,visit"));
    let (mut process, address, said) = serve_told(server);
    let submit = |subject: &str| {
        let body = format!(
            r#"{{"subject": "{subject}", "kwargs": {{"ttl": "1h", "on_expiry": "kill"}}}}"#
        );
        format!(
            "POST /v1/targets/asker/submit HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
    };
    let request = submit("s0");
    let answer = call(&address, &request);
    assert!(answer.starts_with("HTTP/1.1 202"), "{answer}");
    // Another process takes the node over once the server's connections are gone.
    tokio.block_on(async {
        let (client, connection) = tokio_postgres::connect(
            &std::env::var("PARKWAY_TEST_POSTGRES_URL").unwrap(),
            tokio_postgres::NoTls,
        )
        .await
        .expect("the test server answers");
        tokio::spawn(connection);
        client
            .execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
                &[&name],
            )
            .await
            .expect("the server's connections are ended");
    });
    let other = tokio.block_on(
        parkway::Runtime::builder()
            .without_env()
            .postgres(&url)
            .node("n1")
            .build(),
    );
    let other = other.expect("the node is taken over");
    let answer = call(&address, &submit("s1"));
    assert!(!answer.starts_with("HTTP/1.1 202"), "refused: {answer}");
    let said = said.recv_timeout(BOUND).expect("the server ends by itself");
    let status = process.0.wait().expect("the server's status");
    assert_eq!(status.code(), Some(1), "{said:?}");
    let said = said.unwrap_err();
    assert!(
        said.contains("its store failed") && said.contains("another process took node n1 over"),
        "{said}"
    );
    tokio.block_on(other.shutdown());
}
