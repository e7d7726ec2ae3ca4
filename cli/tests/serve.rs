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
    let mut process = Killed(command(args).spawn().expect("parkway serve starts"));
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
        Ok(Ok(address)) => (process, address),
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
