//! The server handler: `tools/list` and `tools/call` over a [`Runtime`].
//!
//! A call travels one way: the tool is looked up and its arguments checked
//! ([`Runtime::call_tool`]), the run's record comes back, and [`Face::reply`] turns it
//! into the call's answer: a result, an error, or a round of questions. A retry opens
//! its sealed state, reads every answer before it resumes any, resumes them in the
//! round's order, and answers with the run's next record the same way.

use std::collections::HashMap;

use parkway::{Entry, EntryStatus, Event, RunRecord, RunStatus, TaskSupport, ToolCallError};
use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ClientCapabilities,
    ContentBlock as Content, GetTaskParams, GetTaskResult, Implementation, InitializeResult,
    InputRequests, InputRequiredResult, InputResponses, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, ProgressToken, ProtocolVersion, ServerCapabilities, ServerConfig,
    UpdateTaskParams,
};
use rmcp::service::Peer;
use rmcp::service::RequestContext;
use rmcp::{RoleServer, ServerHandler};
use serde_json::{Value, json};
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::{RecvError, TryRecvError};

use crate::face::{Face, IDENTITY, internal, run_meta};
use crate::round::{self, Answer, Needs};
use crate::state::Round;
use crate::tasks;

/// What the client can take, read off the request.
struct Client {
    capabilities: ClientCapabilities,
    /// The negotiated version, when the request has one.
    version: Option<ProtocolVersion>,
}

impl Client {
    fn of(context: &RequestContext<RoleServer>) -> Client {
        Client {
            capabilities: context.client_capabilities().unwrap_or_default(),
            version: context.protocol_version(),
        }
    }

    /// Whether the client speaks a revision with `input_required` rounds.
    fn has_rounds(&self) -> bool {
        self.version
            .as_ref()
            .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
    }

    /// Whether the request declares the tasks extension.
    fn has_tasks(&self) -> bool {
        self.capabilities.supports_tasks()
    }

    fn can(&self, needs: Needs) -> bool {
        let c = &self.capabilities;
        match needs {
            Needs::Elicitation => c.elicitation.is_some(),
            Needs::Sampling => c.sampling.is_some(),
            Needs::Roots => c.roots.is_some(),
        }
    }
}

/// How one call is answered beyond its run's record.
struct Call {
    /// The call may become a task: the tool allows it and the client declares the
    /// extension.
    tasks: bool,
    /// Where the run's progress goes, when the request asked for it.
    relay: Option<Relay>,
}

/// The run's progress, relayed to the client as `notifications/progress` with the
/// request's token.
struct Relay {
    token: ProgressToken,
    peer: Peer<RoleServer>,
    /// Subscribed before the run starts, so no report is missed.
    events: broadcast::Receiver<Event>,
}

impl Call {
    /// Send the progress `run` reported so far.
    async fn flush(&mut self, run: &str) {
        let Some(relay) = &mut self.relay else {
            return;
        };
        loop {
            match relay.events.try_recv() {
                Ok(Event::RunProgress {
                    run: r,
                    progress,
                    total,
                    message,
                    ..
                }) if r == run => {
                    let mut param = ProgressNotificationParam::new(relay.token.clone(), progress);
                    param.total = total;
                    param.message = message;
                    // A client gone is no reason to fail the call: the result says it.
                    let _ = relay.peer.notify_progress(param).await;
                }
                Ok(_) | Err(TryRecvError::Lagged(_)) => {}
                Err(_) => return,
            }
        }
    }
}

/// A tool error: the call's answer with `isError`, naming what went wrong.
fn failed(text: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![Content::text(text.into())])
}

impl Face {
    /// A first call: start the tool's run and answer with its record.
    async fn start(
        &self,
        name: &str,
        params: CallToolRequestParams,
        client: &Client,
        call: &mut Call,
    ) -> Result<CallToolResponse, McpError> {
        let arguments = Value::Object(params.arguments.unwrap_or_default());
        let meta = params
            .meta
            .as_ref()
            .and_then(|m| serde_json::to_value(m).ok())
            .unwrap_or_else(|| json!({}));
        match self
            .runtime
            .call_tool(name, arguments, &meta, IDENTITY)
            .await
        {
            Ok((subject, record)) => {
                self.reply(name, &subject, record, client, &HashMap::new(), call)
                    .await
            }
            Err(ToolCallError::Unknown { name }) => Err(McpError::invalid_params(
                format!("unknown tool {name:?}"),
                None,
            )),
            Err(why @ (ToolCallError::InvalidArguments { .. } | ToolCallError::Subject { .. })) => {
                Ok(failed(why.to_string()).into())
            }
            Err(ToolCallError::Start(why)) => match why {
                parkway::StartError::Stopped | parkway::StartError::Store(_) => Err(internal(why)),
                why => Ok(failed(why.to_string()).into()),
            },
            Err(why) => Err(internal(why)),
        }
    }

    /// A retry: the answers of a round, under its sealed state.
    async fn retry(
        &self,
        name: &str,
        state: &str,
        responses: InputResponses,
        client: &Client,
        call: &mut Call,
    ) -> Result<CallToolResponse, McpError> {
        let round = self
            .states
            .open(name, state)
            .map_err(|why| McpError::invalid_params(why, None))?;
        let keys: Vec<&str> = round.asks.iter().map(|(k, _)| k.as_str()).collect();
        for key in responses.keys() {
            if !keys.contains(&key.as_str()) {
                return Err(McpError::invalid_params(
                    format!(
                        "inputResponses key {key:?} names no ask of this round (its keys: {})",
                        keys.join(", ")
                    ),
                    None,
                ));
            }
        }
        let entries = self.runtime.list(&round.subject).await.map_err(internal)?;
        let open: HashMap<&str, &Entry> = entries
            .iter()
            .filter(|e| {
                e.status == EntryStatus::Asking && round.asks.iter().any(|(_, id)| *id == e.id)
            })
            .map(|e| (e.id.as_str(), e))
            .collect();
        let stale: Vec<&str> = round
            .asks
            .iter()
            .filter(|(key, id)| responses.contains_key(key) && !open.contains_key(id.as_str()))
            .map(|(_, id)| id.as_str())
            .collect();
        if !stale.is_empty() {
            return Ok(self.gone(&round, &stale).await?.into());
        }
        // Every answer is read before any is applied: one that is not an answer asks
        // the round again, naming why, and nothing changes.
        let mut resumes = Vec::new();
        let mut refusals = Vec::new();
        let mut problems = HashMap::new();
        for (key, id) in &round.asks {
            let (Some(response), Some(entry)) = (responses.get(key), open.get(id.as_str())) else {
                continue;
            };
            let shape = round::shape(entry);
            match round::answer(entry, &shape, response) {
                Answer::Resume(payload) => resumes.push((id.clone(), payload)),
                Answer::Refused(why) => refusals.push((id.clone(), why)),
                Answer::Invalid(why) => {
                    problems.insert(id.clone(), why);
                }
            }
        }
        if !problems.is_empty() {
            let record = self.record(&round.run).await?;
            return self
                .reply(name, &round.subject, record, client, &problems, call)
                .await;
        }
        if !refusals.is_empty() {
            let ids: Vec<&str> = refusals.iter().map(|(id, _)| id.as_str()).collect();
            self.runtime
                .cancel(&round.subject, &ids)
                .await
                .map_err(|why| McpError::invalid_params(why.to_string(), None))?;
            let why: Vec<String> = refusals.into_iter().map(|(_, why)| why).collect();
            let record = self.record(&round.run).await?;
            return Ok(failed(format!(
                "{}: the ask was cancelled, and run {} with it ({})",
                why.join("; "),
                record.run_id,
                record.status
            ))
            .with_meta(Some(run_meta(&round.subject, &record.run_id)))
            .into());
        }
        let mut last = None;
        for (i, (id, payload)) in resumes.into_iter().enumerate() {
            match self.runtime.resume(&round.subject, &id, payload).await {
                Ok(parkway::Resumed::Outcome(record)) => last = Some(record),
                Ok(_) => {}
                // Resolved elsewhere between the read and the resume: say so. Answers
                // applied before it stand (each ask is resolved exactly once).
                Err(why) if i == 0 => return Ok(failed(why.to_string()).into()),
                Err(why) => {
                    return Ok(failed(format!(
                        "{why} (the answers before it in this round were applied)"
                    ))
                    .into());
                }
            }
        }
        let record = match last {
            Some(record) => record,
            None => self.record(&round.run).await?,
        };
        self.reply(name, &round.subject, record, client, &HashMap::new(), call)
            .await
    }

    /// Cancel the asks of a round that cannot be sent: never sent, they could never be
    /// answered, and are cancelled now rather than left to expire.
    async fn cancel_unsendable(&self, subject: &str, run: &str, ids: &[&str]) {
        if let Err(e) = self.runtime.cancel(subject, ids).await {
            tracing::warn!(%e, run, "the asks of a round that could not be sent were not cancelled");
        }
    }

    /// The answer to a retry naming asks that are no longer open.
    async fn gone(&self, round: &Round, stale: &[&str]) -> Result<CallToolResult, McpError> {
        let record = self
            .runtime
            .try_record(&round.run)
            .await
            .map_err(internal)?;
        // A run ended longer ago than the retention horizon is no longer known: the
        // retry is refused all the same, and the error says so rather than failing.
        let Some(record) = record else {
            return Ok(failed(format!(
                "{} no longer open (resolved, expired or cancelled); run {} has ended and \
                 is past the retention horizon; nothing was changed",
                match stale {
                    [one] => format!("ask {one} is"),
                    many => format!("asks {} are", many.join(", ")),
                },
                round.run
            ))
            .with_meta(Some(run_meta(&round.subject, &round.run))));
        };
        let how = match record.status {
            status if status.is_terminal() => format!(
                "run {} has ended ({status}{})",
                record.run_id,
                record
                    .error
                    .as_deref()
                    .map(|e| format!(": {e}"))
                    .unwrap_or_default()
            ),
            status => format!("run {} is {status}", record.run_id),
        };
        Ok(failed(format!(
            "{} no longer open (resolved, expired or cancelled); {how}; nothing was changed",
            match stale {
                [one] => format!("ask {one} is"),
                many => format!("asks {} are", many.join(", ")),
            }
        ))
        .with_meta(Some(run_meta(&round.subject, &record.run_id))))
    }

    async fn record(&self, run: &str) -> Result<RunRecord, McpError> {
        self.runtime
            .try_record(run)
            .await
            .map_err(internal)?
            .ok_or_else(|| internal(format!("no record of run {run}")))
    }

    /// Hold a call while its run is at work with nothing to ask (running, or parked on
    /// waits alone), relaying its progress, for at most the options' `max_hold`: the
    /// run's record once it ends or asks, or `None` when the bound passed first.
    async fn hold(&self, run: &str, call: &mut Call) -> Result<Option<RunRecord>, McpError> {
        let deadline = tokio::time::Instant::now() + self.options.max_hold;
        // Subscribed before the first read, so no change between the two is missed.
        let mut events = self.runtime.events();
        loop {
            let record = self.record(run).await?;
            call.flush(run).await;
            if !tasks::busy(&record) {
                return Ok(Some(record));
            }
            loop {
                match tokio::time::timeout_at(deadline, events.recv()).await {
                    Err(_) => return Ok(None),
                    Ok(Ok(event)) if !tasks::about(&event, run) => continue,
                    Ok(Err(RecvError::Closed)) => return Err(internal("the runtime stopped")),
                    Ok(_) => break,
                }
            }
        }
    }

    /// The answer to a call whose run is still at work when its hold ends: a round with
    /// no question, whose state the client sends back to be held again, or, for a
    /// client without rounds, a tool error saying so.
    fn still_working(
        &self,
        tool: &str,
        subject: &str,
        record: &RunRecord,
        client: &Client,
    ) -> CallToolResponse {
        let meta = run_meta(subject, &record.run_id);
        if !client.has_rounds() {
            return failed(format!(
                "run {} is still at work after {} and this client's protocol has no rounds \
                 to call back with; it goes on, and its outcome is kept on subject {subject}",
                record.run_id,
                humantime::format_duration(self.options.max_hold)
            ))
            .with_meta(Some(meta))
            .into();
        }
        let state = self.states.seal(
            tool,
            &Round {
                v: 1,
                subject: subject.to_owned(),
                run: record.run_id.clone(),
                asks: Vec::new(),
            },
        );
        InputRequiredResult::new(None, Some(state))
            .with_meta(meta)
            .into()
    }

    /// The call's answer for `record`: its result, its error, a round of its open
    /// caller asks (`problems` says why an ask is asked again), or, when the run waits
    /// and the call may be a task, the task. A call that may not be a task is held
    /// while its run waits.
    async fn reply(
        &self,
        tool: &str,
        subject: &str,
        mut record: RunRecord,
        client: &Client,
        problems: &HashMap<String, String>,
        call: &mut Call,
    ) -> Result<CallToolResponse, McpError> {
        call.flush(&record.run_id).await;
        if tasks::waits(&record) {
            if call.tasks {
                return Ok(self.create_task(tool, subject, &record).into());
            }
            if tasks::busy(&record) {
                match self.hold(&record.run_id, call).await? {
                    Some(held) => record = held,
                    None => return Ok(self.still_working(tool, subject, &record, client)),
                }
            }
        }
        let meta = run_meta(subject, &record.run_id);
        let result = match record.status {
            RunStatus::Succeeded => self
                .content(tool, record.result.unwrap_or(Value::Null))
                .map_err(|why| McpError::internal_error(why, None))?,
            RunStatus::Failed | RunStatus::Cancelled => self.failure(&record),
            RunStatus::Parked => {
                let asks = tasks::questions(&record);
                if asks.is_empty() {
                    // Every ask of the group is answered and the run is about to resume:
                    // nothing to ask.
                    return Ok(CallToolResult::success(vec![Content::text(format!(
                        "run {} has its answers and is resuming",
                        record.run_id
                    ))])
                    .with_meta(Some(meta))
                    .into());
                }
                return self
                    .round(tool, subject, &record.run_id, asks, client, problems)
                    .await;
            }
            RunStatus::Suspended => CallToolResult::success(vec![Content::text(format!(
                "run {} waits for a person to answer {} in the inbox",
                record.run_id,
                record
                    .suspension
                    .as_ref()
                    .map(|s| s.interactions.join(", "))
                    .unwrap_or_default(),
            ))]),
            _ => CallToolResult::success(vec![Content::text(format!(
                "run {} is {}",
                record.run_id, record.status
            ))]),
        };
        Ok(result.with_meta(Some(meta)).into())
    }

    /// A round of `asks`, or, when the client cannot take it, the asks cancelled and
    /// the reason as a tool error.
    async fn round(
        &self,
        tool: &str,
        subject: &str,
        run: &str,
        asks: Vec<Entry>,
        client: &Client,
        problems: &HashMap<String, String>,
    ) -> Result<CallToolResponse, McpError> {
        let shapes: Vec<round::Shape> = asks.iter().map(round::shape).collect();
        let missing: Vec<String> = asks
            .iter()
            .zip(&shapes)
            .filter(|(_, shape)| !client.can(shape.needs()))
            .map(|(e, shape)| format!("{} needs {}", e.id, shape.needs().name()))
            .collect();
        let ids: Vec<&str> = asks.iter().map(|e| e.id.as_str()).collect();
        if !client.has_rounds() {
            // Never sent, so never answered: cancelled now rather than left to expire.
            self.cancel_unsendable(subject, run, &ids).await;
            return Ok(failed(format!(
                "run {run} asks its caller, and this client speaks protocol {}, which has no \
                 input_required rounds (2026-07-28 or newer has them); the asks were cancelled",
                client.version.as_ref().map_or("(unknown)", |v| v.as_str())
            ))
            .with_meta(Some(run_meta(subject, run)))
            .into());
        }
        let lacking: Vec<Needs> = shapes
            .iter()
            .map(round::Shape::needs)
            .filter(|needs| !client.can(*needs))
            .collect();
        if !lacking.is_empty() {
            self.cancel_unsendable(subject, run, &ids).await;
            let mut required = serde_json::Map::new();
            for needs in &lacking {
                required.insert(needs.name().to_owned(), json!({}));
            }
            return Err(McpError::new(
                rmcp::model::ErrorCode(-32021),
                format!(
                    "run {run} asks its caller for what this client did not declare it can \
                     give ({}); the asks were cancelled",
                    missing.join("; ")
                ),
                Some(json!({"requiredCapabilities": required})),
            ));
        }
        let mut requests = InputRequests::new();
        let mut keyed = Vec::new();
        for (entry, shape) in asks.iter().zip(&shapes) {
            let problem = problems.get(&entry.id).map(String::as_str);
            // A key two asks name is the second one's interaction id instead.
            let mut key = round::key(entry);
            if requests.contains_key(&key) {
                key = entry.id.clone();
            }
            requests.insert(key.clone(), round::request(entry, shape, problem));
            keyed.push((key, entry.id.clone()));
        }
        let state = self.states.seal(
            tool,
            &Round {
                v: 1,
                subject: subject.to_owned(),
                run: run.to_owned(),
                asks: keyed,
            },
        );
        Ok(InputRequiredResult::new(Some(requests), Some(state))
            .with_meta(run_meta(subject, run))
            .into())
    }

    /// A failed or cancelled run as the tool's answer: a tool error naming why.
    pub(crate) fn failure(&self, record: &RunRecord) -> CallToolResult {
        failed(format!(
            "run {} {}: {}",
            record.run_id,
            if record.status == RunStatus::Failed {
                "failed"
            } else {
                "was cancelled"
            },
            record.error.as_deref().unwrap_or("no reason given")
        ))
    }

    /// A succeeded run's result as the tool's answer; `Err` naming why when a tool
    /// whose result is its content returned something that is no tool result (the
    /// server failed to answer, which is no tool error: -32603).
    pub(crate) fn content(&self, tool: &str, value: Value) -> Result<CallToolResult, String> {
        let form = self
            .runtime
            .tool(tool)
            .map(|t| t.spec.result)
            .unwrap_or_default();
        if form == parkway::ResultForm::Content {
            return match serde_json::from_value::<CallToolResult>(value) {
                Ok(mut result) => {
                    result.result_type = Some(rmcp::model::ResultType::COMPLETE);
                    Ok(result)
                }
                Err(e) => Err(format!(
                    "tool {tool} returned a result that is not a tool result: {e}"
                )),
            };
        }
        Ok(match value {
            Value::String(text) => CallToolResult::success(vec![Content::text(text)]),
            value => {
                let mut result = CallToolResult::success(vec![Content::text(value.to_string())]);
                result.structured_content = Some(value);
                result
            }
        })
    }
}

impl ServerHandler for Face {
    fn get_info(&self) -> ServerConfig {
        // Completions are offered (and none are known) so that a client asking for them
        // is answered, not refused: there are no prompts or resources to complete.
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_completions()
            .enable_tasks()
            .build();
        InitializeResult::new(capabilities)
            .with_server_info(Implementation::new("parkway", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Each tool is a parkway run. A tool that asks its caller answers \
                 input_required; answer with inputResponses and the requestState.",
            )
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let from = match request.and_then(|r| r.cursor) {
            None => 0,
            Some(cursor) => cursor.parse::<usize>().map_err(|_| {
                McpError::invalid_params(
                    format!("cursor {cursor:?} is not one this server gave"),
                    None,
                )
            })?,
        };
        let tools = self.runtime.tools();
        let size = self.options.page_size.max(1);
        let page: Vec<Value> = tools
            .iter()
            .skip(from)
            .take(size)
            .map(|t| {
                let spec = &t.spec;
                let mut tool = json!({"name": spec.name, "inputSchema": spec.input_schema});
                if let Some(title) = &spec.title {
                    tool["title"] = json!(title);
                }
                if let Some(description) = &spec.description {
                    tool["description"] = json!(description);
                }
                if let Some(output) = &spec.output_schema {
                    tool["outputSchema"] = output.clone();
                }
                if spec.task_support != TaskSupport::Forbidden {
                    tool["execution"] = json!({"taskSupport": spec.task_support.as_str()});
                }
                tool
            })
            .collect();
        let next = (from + size < tools.len()).then(|| (from + size).to_string());
        serde_json::from_value(json!({"resultType": "complete", "tools": page, "nextCursor": next}))
            .map_err(internal)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let client = Client::of(&context);
        let name = request.name.to_string();
        let Some(tool) = self.runtime.tool(&name) else {
            return Err(McpError::invalid_params(
                format!(
                    "unknown tool {:?}",
                    name.chars()
                        .take(parkway::MAX_TOOL_NAME)
                        .collect::<String>()
                ),
                None,
            ));
        };
        let support = tool.spec.task_support;
        if support == TaskSupport::Required && !client.has_tasks() {
            return Err(McpError::missing_required_client_capability(
                ClientCapabilities::builder().enable_tasks().build(),
            ));
        }
        let relay = context.meta.get_progress_token().map(|token| Relay {
            token,
            peer: context.peer.clone(),
            events: self.runtime.events(),
        });
        let mut call = Call {
            tasks: support != TaskSupport::Forbidden && client.has_tasks(),
            relay,
        };
        match request.request_state.clone() {
            None => self.start(&name, request, &client, &mut call).await,
            Some(state) => {
                let responses = request.input_responses.unwrap_or_default();
                self.retry(&name, &state, responses, &client, &mut call)
                    .await
            }
        }
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        self.get(request).await
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.update(request).await
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.cancel(request).await
    }
}
