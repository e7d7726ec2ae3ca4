//! The sealed `requestState` of a round: which subject, run and asks a retry resumes.
//!
//! The client echoes the state back untouched, so it is untrusted input: it is sealed
//! with HMAC-SHA256 under the server's key (rmcp's `RequestStateCodec`), bound to the
//! tool it was issued for, and opened before anything in it is read. A state that fails
//! to open (tampered, forged, issued by a server with another key or for another tool)
//! changes nothing. Sealing is integrity only: a state is readable, and holds nothing
//! secret (ids the client is already shown).

use rmcp::model::{RequestStateCodec, SealOptions};
use serde::{Deserialize, Serialize};

/// The longest `requestState` opened, in bytes; a longer one is refused unread.
pub(crate) const MAX_STATE_BYTES: usize = 16 << 10;

/// What a round's state names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Round {
    /// The format of this state (1).
    pub(crate) v: u8,
    /// The subject the run parks on.
    pub(crate) subject: String,
    /// The run whose asks the round shows.
    pub(crate) run: String,
    /// The asks of the round: each one's key in `inputRequests` and its interaction id.
    pub(crate) asks: Vec<(String, String)>,
}

/// What a task's id names: the run that is the task, its subject, and the tool it was
/// called as. Sealed like a round's state, under its own associated data, so a task id
/// is never read as a round's state nor the other way round.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct TaskRef {
    /// The format of this id (1).
    pub(crate) v: u8,
    /// The tool the task was called as.
    pub(crate) tool: String,
    /// The subject the run parks on.
    pub(crate) subject: String,
    /// The run.
    pub(crate) run: String,
}

/// The associated data a task id is sealed under.
const TASK_AD: &[u8] = b"io.modelcontextprotocol/tasks";

/// Seals and opens round states with the server's key.
pub(crate) struct States {
    codec: RequestStateCodec,
}

impl std::fmt::Debug for States {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("States")
    }
}

impl States {
    /// States sealed with `key` (at least 32 bytes).
    pub(crate) fn new(key: &[u8]) -> Result<States, String> {
        RequestStateCodec::try_new(key.to_vec())
            .map(|codec| States { codec })
            .map_err(|e| e.to_string())
    }

    /// `round`, sealed for `tool`.
    pub(crate) fn seal(&self, tool: &str, round: &Round) -> String {
        let options = SealOptions::new().associated_data(tool.as_bytes());
        // A plain struct of strings always serialises.
        self.codec
            .seal_json_with(round, &options)
            .unwrap_or_default()
    }

    /// `task` as a task id.
    pub(crate) fn seal_task(&self, task: &TaskRef) -> String {
        let options = SealOptions::new().associated_data(TASK_AD);
        // A plain struct of strings always serialises.
        self.codec
            .seal_json_with(task, &options)
            .unwrap_or_default()
    }

    /// The task `id` names, if this server issued it; else why not.
    pub(crate) fn open_task(&self, id: &str) -> Result<TaskRef, String> {
        if id.len() > MAX_STATE_BYTES {
            return Err(format!(
                "taskId is {} bytes long, more than any this server issues",
                id.len()
            ));
        }
        let task: TaskRef = self
            .codec
            .open_json_with(id, TASK_AD)
            .map_err(|e| format!("unknown task: the taskId was not issued by this server ({e})"))?;
        if task.v != 1 {
            return Err(format!("taskId has unknown format {}", task.v));
        }
        Ok(task)
    }

    /// The round `text` names, if this server sealed it for `tool`; else why not.
    pub(crate) fn open(&self, tool: &str, text: &str) -> Result<Round, String> {
        if text.len() > MAX_STATE_BYTES {
            return Err(format!(
                "requestState is {} bytes long, more than any this server issues ({MAX_STATE_BYTES})",
                text.len()
            ));
        }
        let round: Round = self
            .codec
            .open_json_with(text, tool.as_bytes())
            .map_err(|e| {
                format!("requestState was not issued by this server for tool {tool}: {e}")
            })?;
        if round.v != 1 {
            return Err(format!("requestState has unknown format {}", round.v));
        }
        Ok(round)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round() -> Round {
        Round {
            v: 1,
            subject: "s".into(),
            run: "r-1".into(),
            asks: vec![("i-1".into(), "i-1".into())],
        }
    }

    #[test]
    fn a_state_opens_only_for_its_tool_and_key() {
        let states = States::new(&[7; 32]).unwrap();
        let sealed = states.seal("deploy", &round());
        assert_eq!(states.open("deploy", &sealed).unwrap(), round());
        assert!(states.open("other", &sealed).is_err());
        let foreign = States::new(&[8; 32]).unwrap();
        assert!(foreign.open("deploy", &sealed).is_err());
        let mut tampered = sealed.clone().into_bytes();
        let at = tampered.len() / 2;
        tampered[at] = if tampered[at] == b'A' { b'B' } else { b'A' };
        let tampered = String::from_utf8(tampered).unwrap();
        assert!(states.open("deploy", &tampered).is_err());
        assert!(
            states
                .open("deploy", &"x".repeat(MAX_STATE_BYTES + 1))
                .is_err()
        );
    }

    #[test]
    fn a_task_id_opens_only_as_a_task_id() {
        let states = States::new(&[7; 32]).unwrap();
        let task = TaskRef {
            v: 1,
            tool: "deploy".into(),
            subject: "s".into(),
            run: "r-1".into(),
        };
        let id = states.seal_task(&task);
        assert_eq!(states.open_task(&id).unwrap(), task);
        // A round's state is no task id, and a task id is no round's state.
        assert!(states.open_task(&states.seal("deploy", &round())).is_err());
        assert!(states.open("deploy", &id).is_err());
        assert!(States::new(&[8; 32]).unwrap().open_task(&id).is_err());
        assert!(
            states
                .open_task("tasks-conformance-nonexistent-12345")
                .is_err()
        );
    }

    #[test]
    fn a_short_key_is_refused() {
        assert!(States::new(b"short").is_err());
    }
}
