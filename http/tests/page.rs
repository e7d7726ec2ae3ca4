//! The inbox page in a real headless browser: Debian's chromium driven through its
//! chromedriver over WebDriver. The page lists pending user asks, shows a new one
//! without a reload, names who asked by title, says how long is left as time passes,
//! answers each format, repeats the answer sent, shows a refused answer's reason beside
//! its field, and the asking run resumes with the answer.
//!
//! Needs the Debian packages `chromium` and `chromium-driver`; without them the test
//! fails saying so. With `PARKWAY_SCREENSHOT=1` it also saves `docs/inbox-page.png`.

mod common;

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{ADMIN, ANSWER, BOUND, Server, VISIT, builder};
use fantoccini::{Client, ClientBuilder, Locator};
use parkway::{Ask, Builder, ToolSpec};
use parkway_http::Options;
use reqwest::Method;
use serde_json::{Value, json};

const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const CHROMIUM: &str = "/usr/bin/chromium";
const HOUR: Duration = Duration::from_secs(3600);

/// A running chromedriver, killed when dropped (a failing test included), with the
/// browser profile's temporary directory.
struct Driver {
    child: Child,
    url: String,
    profile: tempfile::TempDir,
}

impl Driver {
    /// Start chromedriver on a port it picks (`--port=0`) and read the port it tells.
    fn start() -> Driver {
        for path in [CHROMIUM, CHROMEDRIVER] {
            assert!(
                Path::new(path).exists(),
                "{path} is missing: this test needs the Debian packages chromium and \
                 chromium-driver (apt-get install -y chromium chromium-driver)"
            );
        }
        let mut child = Command::new(CHROMEDRIVER)
            .arg("--port=0")
            // A group of its own, which the browser it starts joins: killed together.
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let stdout = child.stdout.take().expect("chromedriver's output");
        let profile = tempfile::tempdir().expect("a profile directory");
        // Owned from here: a failure below still kills the process.
        let mut driver = Driver {
            child,
            url: String::new(),
            profile,
        };
        let (tx, rx) = std::sync::mpsc::channel();
        // Reads every line, so chromedriver never blocks on a full pipe.
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let port = line
                    .split_once("started successfully on port ")
                    .and_then(|(_, rest)| rest.trim_end_matches('.').trim().parse::<u16>().ok());
                if let Some(port) = port {
                    let _ = tx.send(port);
                }
            }
        });
        let port = rx
            .recv_timeout(BOUND)
            .expect("chromedriver tells the port it listens on");
        driver.url = format!("http://127.0.0.1:{port}");
        driver
    }

    /// A WebDriver session of headless chromium with a fresh profile.
    async fn browser(&self) -> Client {
        let args = [
            "--headless".to_owned(),
            "--no-sandbox".to_owned(),
            "--disable-gpu".to_owned(),
            "--no-first-run".to_owned(),
            "--disable-background-networking".to_owned(),
            "--disable-component-update".to_owned(),
            "--disable-sync".to_owned(),
            // Tall enough for the screenshot to hold five items.
            "--window-size=1000,1850".to_owned(),
            format!("--user-data-dir={}", self.profile.path().display()),
        ];
        let capabilities = json!({
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": CHROMIUM, "args": args},
        });
        let Value::Object(capabilities) = capabilities else {
            unreachable!("an object")
        };
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        ClientBuilder::new(connector)
            .capabilities(capabilities)
            .connect(&self.url)
            .await
            .expect("a chromium session through chromedriver")
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            // SAFETY: kill(2) with a negative pid signals that process group; it touches
            // no memory of this process. The group is chromedriver's own (see `start`).
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A target that asks a person `ask` and returns `{"answer": …}`.
fn asking(builder: Builder, name: &str, ask: Ask) -> Builder {
    builder.register(name, &[], move |ctx, _, _| {
        let ask = ask.clone();
        async move {
            let answer = ctx.ask(ask).await?;
            Ok(json!({ "answer": answer }))
        }
    })
}

/// The test targets, one per answer format. `ship` and `release` are offered as tools
/// with a title; `release` calls `release_notes`, which asks within it.
fn targets(builder: Builder) -> Builder {
    let builder = builder
        .tool("ship", ToolSpec::new("ship").title("Ship a release"))
        .tool(
            "release",
            ToolSpec::new("release").title("Release pipeline"),
        )
        .register("release", &[], |ctx, _, _| async move {
            let record = ctx.call("release_notes", json!({})).await?;
            Ok(serde_json::to_value(record)?)
        });
    let builder = asking(
        builder,
        "ship",
        Ask::user("Ship release 1.4 to production?")
            .answer_format("confirm")
            .expiry_at(HOUR),
    );
    let builder = asking(
        builder,
        "pick_environment",
        Ask::user("Which environment first?")
            .answer_format("select")
            .options(["staging", "production", "canary"])
            .expiry_at(HOUR),
    );
    let builder = asking(
        builder,
        "release_notes",
        Ask::user("Anything the release notes should say?")
            .answer_format("text")
            .expiry_at(HOUR),
    );
    let builder = asking(
        builder,
        "scale",
        Ask::user("How should the service be scaled?")
            .answer_format("form")
            .schema(json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "The service's name"},
                    "replicas": {"type": "integer", "minimum": 1, "maximum": 10},
                    "ratio": {"type": "number", "title": "Canary ratio"},
                    "region": {"enum": ["eu-west", "us-east"]},
                    "dry_run": {"type": "boolean", "title": "Dry run"},
                    "labels": {"type": "object"}
                },
                "required": ["name", "replicas"]
            }))
            .expiry_at(HOUR),
    );
    asking(
        builder,
        "sign",
        Ask::user("Sign the release in the vault")
            .answer_format("external")
            .expiry_at(HOUR),
    )
}

/// Run `target` on `subject` over HTTP: the run's id and its one interaction's id.
async fn raise(s: &Server, target: &str, subject: &str) -> (String, String) {
    let (status, record) = s
        .call(
            Method::POST,
            &format!("/v1/targets/{target}/run"),
            VISIT,
            Some(json!({ "subject": subject })),
        )
        .await;
    assert_eq!(status, 200, "{record}");
    assert_eq!(record["status"], "suspended", "{record}");
    let run = record["run_id"].as_str().expect("a run id").to_owned();
    let ask = record["suspension"]["interactions"][0]
        .as_str()
        .expect("an interaction id")
        .to_owned();
    (run, ask)
}

/// Run `target` (which calls a child that asks) on `subject` over HTTP: the child run's
/// id and its one interaction's id.
async fn raise_within(s: &Server, target: &str, subject: &str) -> (String, String) {
    let (status, record) = s
        .call(
            Method::POST,
            &format!("/v1/targets/{target}/run"),
            VISIT,
            Some(json!({ "subject": subject })),
        )
        .await;
    assert_eq!(status, 200, "{record}");
    let child = &record["result"];
    assert_eq!(child["status"], "suspended", "{record}");
    let run = child["run_id"].as_str().expect("a run id").to_owned();
    let ask = child["suspension"]["interactions"][0]
        .as_str()
        .expect("an interaction id")
        .to_owned();
    (run, ask)
}

/// The CSS selector of the page's item for interaction `id`.
fn item(id: &str) -> String {
    format!(r#"li[data-id="{id}"]"#)
}

/// Run `script` (a function body returning a value) in the page.
async fn js(c: &Client, script: &str) -> Value {
    c.execute(script, vec![]).await.expect("the script runs")
}

/// Poll `script` until it returns `true`, for at most [`BOUND`].
async fn until(c: &Client, what: &str, script: &str) {
    let deadline = Instant::now() + BOUND;
    loop {
        if js(c, script).await == json!(true) {
            return;
        }
        assert!(Instant::now() < deadline, "timed out waiting: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Wait until the item for `id` is shown.
async fn shown(c: &Client, id: &str) -> fantoccini::elements::Element {
    c.wait()
        .at_most(BOUND)
        .every(Duration::from_millis(50))
        .for_element(Locator::Css(&item(id)))
        .await
        .unwrap_or_else(|e| panic!("the item {id} is shown: {e}"))
}

/// Wait until the item for `id` is gone from the page.
async fn gone(c: &Client, id: &str) {
    let script = format!("return document.querySelector('{}') === null", item(id));
    until(c, &format!("the item {id} leaves the page"), &script).await;
}

/// The item's "asked by" as shown, and each target's name and tooltip.
async fn asked_by(c: &Client, id: &str) -> Value {
    let script = format!(
        "const dd = document.querySelector('{} .asked-by');
         return [dd.textContent, [...dd.querySelectorAll('.target')].map((t) => [t.dataset.target, t.title])]",
        item(id)
    );
    js(c, &script).await
}

/// Wait until the page's notice reads `text`.
async fn noticed(c: &Client, text: &str) {
    let script = format!(
        "return document.getElementById('notice').textContent === {}",
        json!(text)
    );
    until(c, &format!("the notice reads {text:?}"), &script).await;
}

/// Poll the run's record until it is no longer suspended; it must have succeeded.
async fn result(s: &Server, run: &str) -> Value {
    let deadline = Instant::now() + BOUND;
    loop {
        let (status, record) = s
            .call(Method::GET, &format!("/v1/runs/{run}"), VISIT, None)
            .await;
        assert_eq!(status, 200, "{record}");
        if record["status"] != "suspended" && record["status"] != "running" {
            assert_eq!(record["status"], "succeeded", "{record}");
            return record["result"].clone();
        }
        assert!(
            Instant::now() < deadline,
            "run {run} did not resume: {record}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn the_inbox_page_shows_asks_live_answers_each_format_and_shows_refusals() {
    let dir = tempfile::tempdir().expect("a directory");
    let runtime = targets(builder().data_dir(dir.path()))
        .build()
        .await
        .expect("builds");
    let s = Server::with(runtime, Options::default()).await;
    // Pending before the page opens: read from the list.
    let (pick_run, pick) = raise(&s, "pick_environment", "release-1.4").await;
    let (_, sign) = raise(&s, "sign", "release-1.4").await;

    let driver = Driver::start();
    let c = driver.browser().await;
    c.goto(&format!("{}/inbox", s.url)).await.expect("opens");

    // Signed out at first: the token goes into a password box and stays in the tab.
    let token = c
        .wait()
        .at_most(BOUND)
        .for_element(Locator::Css("#token"))
        .await
        .expect("the token box");
    assert_eq!(
        token.attr("type").await.expect("type").as_deref(),
        Some("password")
    );
    let open = c
        .find(Locator::Css("#open"))
        .await
        .expect("the open button");
    // A token the server refuses: back to the sign-in form, saying why.
    token
        .send_keys("not-a-token-of-this-server")
        .await
        .expect("types");
    open.click().await.expect("clicks");
    until(
        &c,
        "a refused token is named",
        "return document.getElementById('login-error').textContent.includes('refused')",
    )
    .await;
    assert!(token.is_displayed().await.expect("displayed"));
    token.send_keys(ANSWER).await.expect("types");
    open.click().await.expect("clicks");
    until(
        &c,
        "the page follows the stream",
        "return document.getElementById('conn').dataset.state === 'live'",
    )
    .await;
    shown(&c, &pick).await;
    shown(&c, &sign).await;
    assert_eq!(
        js(&c, "return sessionStorage.getItem('parkway.answer-token')").await,
        json!(ANSWER)
    );
    assert!(
        !c.current_url()
            .await
            .expect("a url")
            .as_str()
            .contains(ANSWER),
        "the token is never in a URL"
    );
    // Marks this page load: a reload would lose it.
    js(&c, "window.parkwayMark = 'loaded once'; return null").await;

    // Raised after the page loaded: each arrives through the stream.
    let (ship_run, ship) = raise(&s, "ship", "release-1.4").await;
    let (note_run, note) = raise_within(&s, "release", "release-1.4").await;
    let (scale_run, scale) = raise(&s, "scale", "svc-web").await;
    let shipped = shown(&c, &ship).await;
    shown(&c, &note).await;
    shown(&c, &scale).await;
    assert_eq!(
        js(&c, "return window.parkwayMark").await,
        json!("loaded once")
    );
    assert_eq!(
        js(&c, "return document.getElementById('items').dataset.loads").await,
        json!("1"),
        "the list was read once: the new asks came through the stream"
    );
    let text = shipped.text().await.expect("text");
    for part in ["Ship release 1.4 to production?", "release-1.4"] {
        assert!(text.contains(part), "the item shows {part:?}: {text}");
    }

    // Who asked, as a person reads it: a target by its tool's title, else by its name
    // made readable; a chain from its top; each target's name in its tooltip.
    assert_eq!(
        asked_by(&c, &ship).await,
        json!(["Ship a release", [["ship", "target ship"]]])
    );
    assert_eq!(
        asked_by(&c, &pick).await,
        json!([
            "Pick environment",
            [["pick_environment", "target pick_environment"]]
        ])
    );
    assert_eq!(
        asked_by(&c, &note).await,
        json!([
            "Release pipeline › Release notes",
            [
                ["release", "target release"],
                ["release_notes", "target release_notes"]
            ]
        ])
    );

    // How long is left, by the page's clock (the browser's `Date.now`), with the
    // absolute time in `datetime` and the tooltip. Raised with an hour to go and read
    // well within a minute of it: "in 59 min", rounded down.
    let expiry = format!("{} .expiry time", item(&ship));
    let (_, listed) = s.call(Method::GET, "/v1/interactions", ANSWER, None).await;
    let listed = listed["items"]
        .as_array()
        .and_then(|items| items.iter().find(|i| i["id"] == json!(ship)))
        .unwrap_or_else(|| panic!("{ship} is listed: {listed}"))
        .clone();
    assert_eq!(
        js(
            &c,
            &format!(
                "const t = document.querySelector('{expiry}');
                 return [t.textContent, t.dateTime, t.title === new Date(t.dateTime).toLocaleString()]"
            )
        )
        .await,
        json!(["in 59 min", listed["expiry_at"], true])
    );
    // As the clock moves on, the text follows without a reload.
    js(&c, "window.parkwayRealNow = Date.now; return null").await;
    for (left_ms, reads) in [
        (2 * 3_600_000 + 5 * 60_000, "in 2 h 5 min"),
        (40_000, "in 40 s"),
        (-1, "expired"),
    ] {
        js(
            &c,
            &format!(
                "const at = Date.parse(document.querySelector('{expiry}').dateTime);
                 Date.now = () => at - ({left_ms}); return null"
            ),
        )
        .await;
        until(
            &c,
            &format!("the expiry reads {reads:?}"),
            &format!("return document.querySelector('{expiry}').textContent === '{reads}'"),
        )
        .await;
    }
    assert_eq!(
        js(
            &c,
            &format!(
                "return document.querySelector('{} .expiry').hasAttribute('data-expired')",
                item(&ship)
            )
        )
        .await,
        json!(true)
    );
    js(&c, "Date.now = window.parkwayRealNow; return null").await;
    until(
        &c,
        "the expiry reads by the real clock again",
        &format!("return document.querySelector('{expiry}').textContent === 'in 59 min'"),
    )
    .await;

    // The external ask is shown read-only.
    let signed = c
        .find(Locator::Css(&item(&sign)))
        .await
        .expect("the external item");
    signed
        .find(Locator::Css("[data-testid=external-note]"))
        .await
        .expect("a note saying it is answered elsewhere");
    assert!(
        signed.find(Locator::Css("form, button")).await.is_err(),
        "nothing to answer it with"
    );

    // A form answer the schema refuses: each reason beside its field, the item stays.
    let form = c
        .find(Locator::Css(&item(&scale)))
        .await
        .expect("the form item");
    let field = |name: &str| format!(r#".field[data-field="{name}"]"#);
    let replicas = form
        .find(Locator::Css(&format!("{} input", field("replicas"))))
        .await
        .expect("the replicas box");
    assert_eq!(
        replicas.attr("type").await.expect("type").as_deref(),
        Some("number")
    );
    replicas.send_keys("0").await.expect("types");
    form.find(Locator::Css("button.send"))
        .await
        .expect("send")
        .click()
        .await
        .expect("clicks");
    let beside = format!("{} {} .field-problems li", item(&scale), field("replicas"));
    until(
        &c,
        "the refusal is shown beside the replicas field",
        &format!("return document.querySelector('{beside}') !== null"),
    )
    .await;
    let reason = form
        .find(Locator::Css(&format!(
            "{} .field-problems",
            field("replicas")
        )))
        .await
        .expect("the replicas field's problems")
        .text()
        .await
        .expect("text");
    assert!(reason.contains("minimum"), "{reason}");
    let missing = form
        .find(Locator::Css(&format!("{} .field-problems", field("name"))))
        .await
        .expect("the missing name is named beside its field")
        .text()
        .await
        .expect("text");
    assert!(missing.contains("required"), "{missing}");
    let message = form
        .find(Locator::Css("[data-testid=problems] .message"))
        .await
        .expect("the refusal's message beside the form")
        .text()
        .await
        .expect("text");
    assert!(message.contains("invalid"), "{message}");
    assert_eq!(
        replicas
            .attr("aria-invalid")
            .await
            .expect("attr")
            .as_deref(),
        Some("true")
    );
    let (_, page) = s.call(Method::GET, "/v1/interactions", ANSWER, None).await;
    assert_eq!(page["total"], 5, "a refused answer changes nothing: {page}");

    // Five pending asks, one of them just refused: the picture in the docs.
    if std::env::var("PARKWAY_SCREENSHOT").as_deref() == Ok("1") {
        let png = c.screenshot().await.expect("a screenshot");
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/inbox-page.png");
        std::fs::write(path, png).expect("the screenshot is saved");
    }

    // Corrected: every kind of field.
    form.find(Locator::Css(&format!("{} input", field("name"))))
        .await
        .expect("the name box")
        .send_keys("web")
        .await
        .expect("types");
    replicas.clear().await.expect("clears");
    replicas.send_keys("3").await.expect("types");
    form.find(Locator::Css(&format!("{} input", field("ratio"))))
        .await
        .expect("the ratio box")
        .send_keys("0.25")
        .await
        .expect("types");
    form.find(Locator::Css(&format!("{} select", field("region"))))
        .await
        .expect("the region choice")
        .select_by_label("us-east")
        .await
        .expect("chooses");
    form.find(Locator::Css(&format!(
        "{} input[type=checkbox]",
        field("dry_run")
    )))
    .await
    .expect("the dry-run box")
    .click()
    .await
    .expect("ticks");
    form.find(Locator::Css(&format!("{} textarea", field("labels"))))
        .await
        .expect("the labels JSON box")
        .send_keys(r#"{"team": "core"}"#)
        .await
        .expect("types");
    form.find(Locator::Css("button.send"))
        .await
        .expect("send")
        .click()
        .await
        .expect("clicks");
    gone(&c, &scale).await;
    // Each answer sent is repeated: a form's fields by their titles, cut short.
    noticed(
        &c,
        "Answer sent: name: web, replicas: 3, Canary ratio: 0.25, region: us-east, \
         Dry run: yes… — How should the service be scaled?",
    )
    .await;
    assert_eq!(
        result(&s, &scale_run).await,
        json!({"answer": {"name": "web", "replicas": 3, "ratio": 0.25, "region": "us-east",
            "dry_run": true, "labels": {"team": "core"}}})
    );

    // Confirm: the Yes button.
    shipped
        .find(Locator::Css("button.yes"))
        .await
        .expect("a Yes button")
        .click()
        .await
        .expect("clicks");
    gone(&c, &ship).await;
    noticed(&c, "Answer sent: yes — Ship release 1.4 to production?").await;
    assert_eq!(result(&s, &ship_run).await, json!({"answer": true}));

    // Select: one of the options.
    let picked = c
        .find(Locator::Css(&item(&pick)))
        .await
        .expect("the select item");
    picked
        .find(Locator::Css("select"))
        .await
        .expect("the options")
        .select_by_value("canary")
        .await
        .expect("chooses");
    picked
        .find(Locator::Css("button.send"))
        .await
        .expect("send")
        .click()
        .await
        .expect("clicks");
    gone(&c, &pick).await;
    noticed(&c, "Answer sent: canary — Which environment first?").await;
    assert_eq!(result(&s, &pick_run).await, json!({"answer": "canary"}));

    // Text: an empty answer is stopped in the page, then a real one is sent.
    let noted = c
        .find(Locator::Css(&item(&note)))
        .await
        .expect("the text item");
    let send = noted.find(Locator::Css("button.send")).await.expect("send");
    send.click().await.expect("clicks");
    let empty = noted
        .find(Locator::Css(".field .field-problems"))
        .await
        .expect("an empty answer is named beside its box")
        .text()
        .await
        .expect("text");
    assert!(empty.contains("Write an answer"), "{empty}");
    noted
        .find(Locator::Css("textarea"))
        .await
        .expect("the text box")
        .send_keys("Faster start-up.")
        .await
        .expect("types");
    send.click().await.expect("clicks");
    gone(&c, &note).await;
    noticed(
        &c,
        "Answer sent: “Faster start-up.” — Anything the release notes should say?",
    )
    .await;
    assert_eq!(
        result(&s, &note_run).await,
        json!({"answer": "Faster start-up."})
    );

    // A dropped stream resumes after the last frame's id: an ask raised while the page
    // is disconnected still arrives, and the list is not read again.
    js(&c, "window.parkwayInbox.reconnect(); return null").await;
    until(
        &c,
        "the page sees the stream drop",
        "return document.getElementById('conn').dataset.state !== 'live'",
    )
    .await;
    let (late_run, late) = raise(&s, "ship", "release-1.5").await;
    let lately = shown(&c, &late).await;
    until(
        &c,
        "the page follows the stream again",
        "return document.getElementById('conn').dataset.state === 'live'",
    )
    .await;
    assert_eq!(
        js(&c, "return document.getElementById('items').dataset.loads").await,
        json!("1"),
        "resumed from the last frame, not reloaded"
    );
    lately
        .find(Locator::Css("button.no"))
        .await
        .expect("a No button")
        .click()
        .await
        .expect("clicks");
    gone(&c, &late).await;
    noticed(&c, "Answer sent: no — Ship release 1.4 to production?").await;
    assert_eq!(result(&s, &late_run).await, json!({"answer": false}));

    // Cancelled elsewhere: the stream's `removed` frame takes the item away.
    let (status, body) = s
        .call(
            Method::POST,
            "/v1/subjects/release-1.4/cancel",
            ADMIN,
            Some(json!({ "ids": [sign] })),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    gone(&c, &sign).await;
    until(
        &c,
        "the page says nothing is waiting",
        "return !document.getElementById('empty').hidden",
    )
    .await;
    assert_eq!(
        js(&c, "return window.parkwayMark").await,
        json!("loaded once")
    );

    // The token is kept for the tab: a reload opens the inbox without asking again.
    c.refresh().await.expect("reloads");
    until(
        &c,
        "the reloaded page follows the stream",
        "return document.getElementById('conn').dataset.state === 'live'",
    )
    .await;
    assert!(
        !c.find(Locator::Css("#token"))
            .await
            .expect("the token box")
            .is_displayed()
            .await
            .expect("displayed"),
        "not asked again"
    );

    c.close().await.expect("the browser closes");
    drop(driver);
    s.stop().await;
}
