//! One of the server's SSE streams, read up to a known frame id: the test mode's settle
//! says which id a step's consequences end at, so nothing is read on a timer.

use std::pin::Pin;

use eventsource_stream::{Event, Eventsource};
use futures_util::{Stream, StreamExt};
use parkway::sim::HANG;
use serde_json::{Value, json};

use super::server::TOKEN;

type Frames = Pin<Box<dyn Stream<Item = Result<Event, String>> + Send>>;

/// A stream, and the id of the last frame read from it.
pub(crate) struct Sse {
    path: &'static str,
    frames: Frames,
    /// The last frame id read (0 before any).
    pub(crate) last: u64,
}

impl Sse {
    /// Open `path` on `base`, resuming after `last` when it is not 0.
    pub(crate) async fn open(
        client: &reqwest::Client,
        base: &str,
        path: &'static str,
        last: u64,
    ) -> Result<Sse, String> {
        let mut request = client.get(format!("{base}{path}")).bearer_auth(TOKEN);
        if last > 0 {
            request = request.header("Last-Event-ID", last.to_string());
        }
        let response = tokio::time::timeout(HANG, request.send())
            .await
            .map_err(|_| format!("{path}: no answer within {HANG:?}"))?
            .map_err(|e| format!("{path}: {e}"))?;
        if !response.status().is_success() {
            return Err(format!("{path}: {}", response.status()));
        }
        let frames = response
            .bytes_stream()
            .eventsource()
            .map(|item| item.map_err(|e| e.to_string()));
        Ok(Sse {
            path,
            frames: Box::pin(frames),
            last,
        })
    }

    /// Every frame after the last one read, up to and including id `until`, each as its
    /// JSON data; a frame the stream sends without a JSON body (a `reset`) is shown as
    /// `{"frame": <its name>, "data": <its text>}`.
    pub(crate) async fn read_until(&mut self, until: u64) -> Result<Vec<Value>, String> {
        let mut out = Vec::new();
        while self.last < until {
            let frame = tokio::time::timeout(HANG, self.frames.next())
                .await
                .map_err(|_| {
                    format!(
                        "{}: frame {until} did not come within {HANG:?} (the last was {})",
                        self.path, self.last
                    )
                })?
                .ok_or_else(|| format!("{}: the stream ended before frame {until}", self.path))??;
            if let Ok(id) = frame.id.parse::<u64>() {
                self.last = id;
            }
            out.push(
                serde_json::from_str(&frame.data)
                    .unwrap_or_else(|_| json!({"frame": frame.event, "data": frame.data})),
            );
        }
        Ok(out)
    }
}
