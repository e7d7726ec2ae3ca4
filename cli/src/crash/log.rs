//! The crash log: one JSON object a line, appended by every generation (the children and
//! the checker's own openings) to one file.
//!
//! A line is written with one `write_all` on a file opened in append mode, so once the
//! call returns the operating system holds it whatever happens to the process next: a
//! `SIGKILL` loses nothing written. Only a line being written at the kill can be torn;
//! [`Reader`] hands back whole lines only, and the parent cuts a torn tail off before the
//! next generation appends after it.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::Mutex;

use parkway::RunRecord;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One line of the crash log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Line {
    /// A generation opened the data directory (its recovery is done).
    Open {
        /// The generation.
        #[serde(rename = "gen")]
        generation: u64,
        /// Who opened it: `child` (driven, then killed) or `check` (the parent's opening).
        role: Role,
    },
    /// An operation is about to be called: it may or may not happen if no [`Line::Ack`]
    /// of the same generation and sequence number follows.
    Begin {
        /// The generation.
        #[serde(rename = "gen")]
        generation: u64,
        /// The operation's number within its generation.
        seq: u64,
        /// The subject it is called on.
        subject: String,
        /// What is called.
        call: Call,
    },
    /// The operation begun under the same generation and number returned: acknowledged.
    Ack {
        /// The generation.
        #[serde(rename = "gen")]
        generation: u64,
        /// The operation's number within its generation.
        seq: u64,
        /// What it returned.
        acked: Acked,
    },
    /// A target ran its journaled step for real (a replay of a journaled step writes
    /// nothing).
    Step {
        /// The generation the step ran in.
        #[serde(rename = "gen")]
        generation: u64,
        /// The nonce of the start that began the run.
        nonce: String,
        /// The run.
        run: String,
    },
}

/// Who opened the data directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// A child driving the workload until it is killed.
    Child,
    /// The parent, reopening the directory after a kill to check it.
    Check,
}

/// The targets the workload starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    /// Asks its caller once.
    One,
    /// Asks its caller twice in one activation: a group of two.
    Pair,
    /// Runs a journaled step, then asks its caller once.
    Stepped,
}

impl Target {
    /// Every target.
    pub const ALL: [Target; 3] = [Target::One, Target::Pair, Target::Stepped];

    /// The name it is registered under.
    pub fn name(self) -> &'static str {
        match self {
            Target::One => "one",
            Target::Pair => "pair",
            Target::Stepped => "stepped",
        }
    }

    /// How many asks its first activation raises.
    pub fn asks(self) -> usize {
        match self {
            Target::Pair => 2,
            Target::One | Target::Stepped => 1,
        }
    }

    /// The target registered under `name`.
    pub fn named(name: &str) -> Option<Target> {
        Target::ALL.into_iter().find(|t| t.name() == name)
    }
}

/// An operation on a subject.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Call {
    /// `Runtime::run`: start `target` with `{"nonce": nonce}` and wait for its first
    /// activation's record.
    Start {
        /// The target.
        target: Target,
        /// Unique across the whole log: `n<generation>-<seq>`.
        nonce: String,
    },
    /// `Runtime::resume` with the answer `payload`; the caller waits inline.
    Resume {
        /// The ask.
        interaction: String,
        /// The answer, unique across the log.
        payload: String,
    },
    /// `Runtime::resume_detached`: the outcome is left waiting on the subject.
    ResumeDetached {
        /// The ask.
        interaction: String,
        /// The answer, unique across the log.
        payload: String,
    },
    /// `Runtime::cancel` of one id: an ask (the whole run is torn down) or a waiting
    /// outcome (only the entry goes).
    Cancel {
        /// The entry.
        interaction: String,
    },
    /// `Runtime::take` of a waiting outcome.
    Take {
        /// The entry.
        interaction: String,
    },
}

impl Call {
    /// The interaction the call names, if any.
    pub fn interaction(&self) -> Option<&str> {
        match self {
            Call::Start { .. } => None,
            Call::Resume { interaction, .. }
            | Call::ResumeDetached { interaction, .. }
            | Call::Cancel { interaction }
            | Call::Take { interaction } => Some(interaction),
        }
    }
}

/// What an acknowledged operation returned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Acked {
    /// A start's record.
    Started(Box<RunRecord>),
    /// A resume whose answer was buffered: `remaining` asks of the group still ask.
    Buffered {
        /// Asks of the group still asking.
        remaining: usize,
    },
    /// A resume's outcome: the run's next record.
    Resumed(Box<RunRecord>),
    /// A detached resume was accepted.
    Detached,
    /// A cancel was done.
    Cancelled,
    /// A take's value.
    Taken(Value),
    /// A take of a failed outcome: its error.
    TakenFailed(String),
    /// The operation was refused (or failed): the error's text.
    Refused(String),
}

/// The log file, shared by a generation's tasks and targets.
#[derive(Debug)]
pub struct Log {
    file: Mutex<File>,
}

impl Log {
    /// Open `path` for appending, creating it if need be.
    pub fn open(path: &Path) -> std::io::Result<Log> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(Log {
            file: Mutex::new(file),
        })
    }

    /// Append `line` with one write. A line that cannot be written stops the process:
    /// a log with a hole would make the checker blame the runtime for it.
    pub fn write(&self, line: &Line) {
        let mut text = match serde_json::to_vec(line) {
            Ok(text) => text,
            Err(e) => fail(&format!("a log line cannot be written: {e}")),
        };
        text.push(b'\n');
        let mut file = match self.file.lock() {
            Ok(file) => file,
            Err(poisoned) => poisoned.into_inner(),
        };
        if let Err(e) = file.write_all(&text) {
            fail(&format!("the crash log cannot be written: {e}"));
        }
    }
}

/// Stop the process at once: the log must not go on with a hole in it.
fn fail(message: &str) -> ! {
    eprintln!("parkway crash: {message}");
    std::process::exit(3)
}

/// Reads the log as it grows, whole lines only.
#[derive(Debug)]
pub struct Reader {
    file: File,
    /// Bytes of the file read and handed back as lines.
    offset: u64,
    /// Lines handed back so far: the next line's position.
    lines: u64,
}

impl Reader {
    /// Read `path` from its start.
    pub fn open(path: &Path) -> std::io::Result<Reader> {
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        Ok(Reader {
            file,
            offset: 0,
            lines: 0,
        })
    }

    /// Cut off a torn last line (one without its newline: the writer was killed inside
    /// its write), so the next writer starts on a line of its own; whether a line was cut.
    /// Call it only while nothing writes to the file.
    pub fn cut_torn_tail(&mut self) -> std::io::Result<bool> {
        let len = self.file.metadata()?.len();
        if len <= self.offset {
            return Ok(false);
        }
        let mut tail = Vec::new();
        self.file.seek(SeekFrom::Start(self.offset))?;
        (&self.file)
            .take(len - self.offset)
            .read_to_end(&mut tail)?;
        if tail.last() == Some(&b'\n') {
            return Ok(false);
        }
        let keep = tail
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i as u64 + 1);
        self.file.set_len(self.offset + keep)?;
        Ok(true)
    }

    /// Every whole line appended since the last call, each with its position in the log
    /// (counted from 0). A line that is not valid is an error naming its position.
    pub fn next_lines(&mut self) -> Result<Vec<(u64, Line)>, String> {
        let mut bytes = Vec::new();
        self.file
            .seek(SeekFrom::Start(self.offset))
            .and_then(|_| (&self.file).read_to_end(&mut bytes))
            .map_err(|e| format!("the crash log cannot be read: {e}"))?;
        let whole = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        let mut lines = Vec::new();
        for text in bytes[..whole].split(|&b| b == b'\n') {
            if text.is_empty() {
                continue;
            }
            let line: Line = serde_json::from_slice(text).map_err(|e| {
                format!(
                    "line {} of the crash log is not valid ({e}): {}",
                    self.lines + 1,
                    String::from_utf8_lossy(text)
                )
            })?;
            lines.push((self.lines, line));
            self.lines += 1;
        }
        self.offset += whole as u64;
        Ok(lines)
    }
}
