//! A live server on a real socket, and a client for it.

// Each test binary uses part of this module, and none re-exports it.
#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use parkway::{Ask, Builder, Runtime};
use parkway_http::{Options, Scope, Tokens, router};
use serde_json::{Value, json};

pub const ADMIN: &str = "admin-token-0000000001";
pub const VISIT: &str = "visit-token-0000000001";
pub const ANSWER: &str = "answer-token-000000001";

/// How long a test waits for anything over the socket before it fails.
pub const BOUND: Duration = Duration::from_secs(20);

/// A server on 127.0.0.1 with a port of its own.
pub struct Server {
    pub url: String,
    pub runtime: Runtime,
    pub client: reqwest::Client,
    task: tokio::task::JoinHandle<()>,
}

/// The tokens every test server accepts: one per scope.
pub fn tokens() -> Tokens {
    Tokens::none()
        .with(ADMIN, &[Scope::Admin])
        .with(VISIT, &[Scope::Visit])
        .with(ANSWER, &[Scope::Answer])
}

/// A builder with the test targets: `asker` asks its caller `go?` and returns the
/// answer, `user_asker` asks a person to confirm, `echo` returns its kwargs.
pub fn builder() -> Builder {
    Runtime::builder()
        .without_env()
        .register("asker", &[], |ctx, _, _| async move {
            let answer = ctx
                .ask(Ask::caller("go?").expiry_at(Duration::from_secs(3600)))
                .await?;
            Ok(json!({ "answer": answer }))
        })
        .register("user_asker", &[], |ctx, _, _| async move {
            let answer = ctx
                .ask(
                    Ask::user("ship it?")
                        .answer_format("confirm")
                        .expiry_at(Duration::from_secs(3600)),
                )
                .await?;
            Ok(json!({ "answer": answer }))
        })
        .register("echo", &[], |_, kwargs, _| async move { Ok(kwargs) })
}

impl Server {
    /// Serve `runtime` with the test tokens and `options`.
    pub async fn with(runtime: Runtime, options: Options) -> Server {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binds");
        Server::on(listener, runtime, options).await
    }

    /// Serve `runtime` on `listener` with the test tokens and `options`.
    pub async fn on(
        listener: tokio::net::TcpListener,
        runtime: Runtime,
        options: Options,
    ) -> Server {
        let url = format!("http://{}", listener.local_addr().expect("bound"));
        let app = router(runtime.clone(), tokens(), options.clone());
        let task = tokio::spawn(async move {
            parkway_http::serve(listener, app, &options).await;
        });
        let client = reqwest::Client::builder()
            .timeout(BOUND)
            .build()
            .expect("a client");
        Server {
            url,
            runtime,
            client,
            task,
        }
    }

    /// Serve a runtime in memory built from [`builder`].
    pub async fn start() -> Server {
        let runtime = builder().build().await.expect("builds");
        Server::with(runtime, Options::default()).await
    }

    /// A request to `path` with `token`.
    pub fn request(
        &self,
        method: reqwest::Method,
        path: &str,
        token: &str,
    ) -> reqwest::RequestBuilder {
        self.client
            .request(method, format!("{}{path}", self.url))
            .bearer_auth(token)
    }

    /// `method path` with `token` and a JSON `body`: the status and the body as JSON.
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        token: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut request = self.request(method, path, token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.expect("answers");
        let status = response.status().as_u16();
        let text = response.text().await.expect("a body");
        let value = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        (status, value)
    }

    /// Stop serving and shut the runtime down.
    pub async fn stop(self) {
        self.task.abort();
        let _ = self.task.await;
        self.runtime.shutdown().await;
    }
}

/// One SSE frame.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    pub id: Option<u64>,
    pub event: String,
    pub data: Value,
}

/// An open SSE stream, read frame by frame.
pub struct Stream {
    response: reqwest::Response,
    buffer: String,
}

impl Stream {
    /// Open `path` with `token`, resuming after `last` if given.
    pub async fn open(server: &Server, path: &str, token: &str, last: Option<u64>) -> Stream {
        let mut request = server
            .client
            .get(format!("{}{path}", server.url))
            .bearer_auth(token)
            // A stream outlives the client's whole-request timeout.
            .timeout(Duration::from_secs(3600));
        if let Some(last) = last {
            request = request.header("Last-Event-ID", last.to_string());
        }
        let response = request.send().await.expect("answers");
        assert_eq!(response.status().as_u16(), 200, "the stream opened");
        Stream {
            response,
            buffer: String::new(),
        }
    }

    /// The next frame (keep-alive comments skipped), waiting at most [`BOUND`].
    pub async fn next(&mut self) -> Frame {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let (mut id, mut event, mut data) = (None, String::from("message"), String::new());
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("id:") {
                        id = v.trim().parse().ok();
                    } else if let Some(v) = line.strip_prefix("event:") {
                        event = v.trim().to_owned();
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.trim_start());
                    }
                }
                if data.is_empty() && id.is_none() {
                    continue;
                }
                return Frame {
                    id,
                    event,
                    data: serde_json::from_str(&data).unwrap_or(Value::String(data)),
                };
            }
            let chunk = tokio::time::timeout(BOUND, self.response.chunk())
                .await
                .expect("a frame within the bound")
                .expect("the stream reads")
                .expect("the stream is open");
            self.buffer.push_str(&String::from_utf8_lossy(&chunk));
        }
    }

    /// Frames until one satisfies `done`, that one included.
    pub async fn until(&mut self, done: impl Fn(&Frame) -> bool) -> Vec<Frame> {
        let mut frames = Vec::new();
        loop {
            let frame = self.next().await;
            let stop = done(&frame);
            frames.push(frame);
            if stop {
                return frames;
            }
        }
    }
}
