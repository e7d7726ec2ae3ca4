//! `parkway sim --http`: a scenario played twice, once on a runtime in this process and
//! once over HTTP against a live `parkway serve` in test mode (real sockets, a real
//! child process, a real stop and start for a `restart` step), and the two transcripts
//! compared line by line: every output, error, event, note, clock reading and check.
//! With `--random`, [`McpOverHttp`] makes the random workload's MCP rounds over
//! Streamable HTTP.

mod driver;
mod rounds;
mod server;
mod stream;

use std::path::Path;

use parkway::sim::{self, Scenario, Transcript};
use serde_json::Value;

pub use driver::Http;
pub use rounds::McpOverHttp;

/// Play the scenario at `path` in process and over HTTP with the server `exe serve`,
/// both on a data directory; the HTTP transcript and every difference between the two
/// (empty when they agree).
pub async fn replay(exe: &Path, path: &Path) -> Result<(Transcript, Vec<String>), String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut scenario = Scenario::from_json(&text).map_err(|e| e.problems.join("\n"))?;
    // The server keeps a data directory always (its event log numbers the frames read
    // back), so the run it is compared with does too.
    scenario.settings.durable = true;
    let here = sim::run(&scenario)
        .await
        .map_err(|e| format!("the runtime did not start: {e}"))?;
    let mut http = Http::start(exe, path).await?;
    let there = sim::play(&scenario, &mut http).await;
    http.stop().await?;
    let differences = compare(&here, &there);
    Ok((there, differences))
}

/// Every difference between two transcripts of one scenario, each naming its step and
/// what differs, with both sides.
pub fn compare(here: &Transcript, there: &Transcript) -> Vec<String> {
    let mut out = Vec::new();
    if here.lines.len() != there.lines.len() {
        out.push(format!(
            "{} steps in process, {} over HTTP",
            here.lines.len(),
            there.lines.len()
        ));
    }
    for (a, b) in here.lines.iter().zip(&there.lines) {
        let fields: [(&str, Value, Value); 6] = [
            ("output", json(&a.output), json(&b.output)),
            ("error", json(&a.error), json(&b.error)),
            ("events", json(&a.events), json(&b.events)),
            ("notes", json(&a.notes), json(&b.notes)),
            ("clock", json(&a.at), json(&b.at)),
            ("check", json(&a.check), json(&b.check)),
        ];
        for (field, x, y) in fields {
            if x != y {
                out.push(format!(
                    "step {} ({}): the {field} differs\n  in process: {x}\n  over HTTP:  {y}",
                    a.step, a.summary
                ));
            }
        }
    }
    out
}

fn json<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn equal_transcripts_agree_and_a_changed_output_is_named() {
        let scenario = Scenario::from_json(r#"{"name": "t", "timeline": [{"advance": "1s"}]}"#)
            .expect("a valid scenario");
        let here = sim::run(&scenario).await.expect("the runtime starts");
        assert!(compare(&here, &here.clone()).is_empty());
        let mut there = here.clone();
        there.lines[0].output = Some(serde_json::json!({"now": "2026-01-01T00:00:02Z"}));
        let differences = compare(&here, &there);
        assert_eq!(differences.len(), 1, "{differences:?}");
        assert!(
            differences[0].starts_with("step 1 (advance the clock 1s): the output differs"),
            "{differences:?}"
        );
    }
}
