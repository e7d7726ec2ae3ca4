//! A TCP proxy between one node and the database, which the harness cuts and heals.
//!
//! A cut is a partition, not a refusal: every connection stays open and nothing passes
//! either way, new connections are accepted and not sent on, until the cut heals; then
//! what was sent meanwhile goes through, as on a network that dropped no connection.
//! The node sees a database that stopped answering, as it would behind a failed switch.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// A proxy listening on a loopback port.
pub(crate) struct Proxy {
    /// Where the node connects.
    pub(crate) address: SocketAddr,
    cut: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl Proxy {
    /// Listen on a free loopback port and send every connection on to `upstream`
    /// (`host:port`).
    pub(crate) async fn start(upstream: String) -> std::io::Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let (cut, cut_seen) = watch::channel(false);
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(pipe(client, upstream.clone(), cut_seen.clone()));
            }
        });
        Ok(Proxy { address, cut, task })
    }

    /// Cut the node off from the database (`true`), or heal the cut.
    pub(crate) fn cut(&self, on: bool) {
        self.cut.send_replace(on);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Until the cut heals.
async fn healed(cut: &mut watch::Receiver<bool>) -> bool {
    cut.wait_for(|on| !on).await.is_ok()
}

/// One connection: opened upstream once no cut holds it, then copied both ways.
async fn pipe(client: TcpStream, upstream: String, mut cut: watch::Receiver<bool>) {
    if !healed(&mut cut).await {
        return;
    }
    let Ok(server) = TcpStream::connect(&upstream).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    tokio::join!(
        copy(client_read, server_write, cut.clone()),
        copy(server_read, client_write, cut)
    );
}

/// Copy `from` to `to`, holding what is read while a cut lasts.
async fn copy(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, mut cut: watch::Receiver<bool>) {
    let mut buffer = vec![0u8; 16 * 1024];
    loop {
        if !healed(&mut cut).await {
            return;
        }
        // A cut that begins while waiting stops the read (nothing read is lost: a read
        // not finished took nothing).
        let read = tokio::select! {
            read = from.read(&mut buffer) => read,
            changed = cut.changed() => match changed {
                Ok(()) => continue,
                Err(_) => return,
            },
        };
        let n = match read {
            Ok(0) | Err(_) => {
                let _ = to.shutdown().await;
                return;
            }
            Ok(n) => n,
        };
        if !healed(&mut cut).await || to.write_all(&buffer[..n]).await.is_err() {
            return;
        }
    }
}
