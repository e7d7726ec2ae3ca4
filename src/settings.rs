//! The runtime's settings: caps, horizons and limits.
//!
//! Each setting has a default, may be read from the environment under its documented
//! name, and may be set on the [`Builder`](crate::Builder), which wins. A malformed
//! environment value is an error naming the variable, never a silent default.

use std::time::Duration;

use thiserror::Error;

/// Environment variable: ceiling on caller asks plus waiting outcomes.
pub const MAX_CONCURRENT_CALLER: &str = "INTERACTIONS_MAX_CONCURRENT_CALLER";
/// Environment variable: ceiling on open user asks.
pub const MAX_CONCURRENT: &str = "INTERACTIONS_MAX_CONCURRENT";
/// Environment variable: how long a waiting outcome is kept before it is dropped (humantime).
pub const WAITING_RETENTION: &str = "INTERACTIONS_WAITING_RETENTION";

/// Every tunable of a runtime.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Settings {
    /// `INTERACTIONS_MAX_CONCURRENT_CALLER`: caller asks (`asking` and `running`) and
    /// waiting outcomes across the runtime. Default 10000.
    pub max_concurrent_caller: usize,
    /// `INTERACTIONS_MAX_CONCURRENT`: open `to = user` asks. Default 1000.
    pub max_concurrent: usize,
    /// `INTERACTIONS_WAITING_RETENTION`: how long a waiting outcome waits to be taken.
    /// Default 24h.
    pub waiting_retention: Duration,
    /// How long a subject with nothing running stays an actor before it passivates to
    /// plain data. Zero passivates as soon as it is idle. Default 30s.
    pub passivate_after: Duration,
    /// How many subjects may hold an actor: past it, the idle subject that has been idle
    /// longest passivates at once rather than after `passivate_after`. A bound on the
    /// memory live subjects hold (an actor and its channels, about 10 KiB, and each
    /// parked ask kept as live data, 1–2 KiB more than passive) when a burst touches
    /// more subjects than the passivation delay lets go. A subject with work in progress
    /// stays live whatever the count; `usize::MAX` is no bound. Default 10000.
    pub max_live_subjects: usize,
    /// Longest accepted `question`, in characters. Default 8192.
    pub max_question_chars: usize,
    /// How long a visit's door expressions may evaluate (together) before the visit fails
    /// and the door is marked broken. Default 100 ms.
    pub jq_deadline: Duration,
    /// The largest door input document, in bytes of JSON. Default 1 MiB.
    pub max_input_bytes: usize,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            max_concurrent_caller: 10_000,
            max_concurrent: 1_000,
            waiting_retention: Duration::from_secs(24 * 60 * 60),
            passivate_after: Duration::from_secs(30),
            max_live_subjects: 10_000,
            max_question_chars: 8192,
            jq_deadline: Duration::from_millis(100),
            max_input_bytes: 1 << 20,
        }
    }
}

/// A setting that could not be read.
#[derive(Debug, Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum SettingsError {
    /// An environment variable held a value of the wrong form.
    #[error("{name}={value:?} is not {expected}")]
    Malformed {
        /// The variable's name.
        name: &'static str,
        /// What it held.
        value: String,
        /// What it should hold.
        expected: &'static str,
    },
    /// A setting was zero where zero makes the runtime useless.
    #[error("{name} must be more than zero: {why}")]
    Zero {
        /// The setting: its environment variable, or the builder method that sets it.
        name: &'static str,
        /// What a zero would do.
        why: &'static str,
    },
}

impl Settings {
    /// The defaults, overridden by whichever of the documented variables `lookup` finds.
    ///
    /// `lookup` is usually `|name| std::env::var(name).ok()`; tests pass a map. Every
    /// malformed variable is reported, not only the first.
    pub fn from_lookup(
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, Vec<SettingsError>> {
        let mut settings = Settings::default();
        let mut errors = Vec::new();
        for (name, slot) in [
            (MAX_CONCURRENT_CALLER, &mut settings.max_concurrent_caller),
            (MAX_CONCURRENT, &mut settings.max_concurrent),
        ] {
            if let Some(value) = lookup(name) {
                match value.trim().parse::<usize>() {
                    Ok(n) => *slot = n,
                    Err(_) => errors.push(SettingsError::Malformed {
                        name,
                        value,
                        expected: "a whole number",
                    }),
                }
            }
        }
        if let Some(value) = lookup(WAITING_RETENTION) {
            match humantime::parse_duration(value.trim()) {
                Ok(d) => settings.waiting_retention = d,
                Err(_) => errors.push(SettingsError::Malformed {
                    name: WAITING_RETENTION,
                    value,
                    expected: "a duration such as 24h or 90m",
                }),
            }
        }
        errors.extend(settings.check());
        if errors.is_empty() {
            Ok(settings)
        } else {
            Err(errors)
        }
    }

    /// Every setting that is zero where zero makes no sense: a zero `jq_deadline` breaks
    /// every door at its first visit, a zero retention drops every waiting outcome (and
    /// every ended run's record) the moment it is stored, and a zero `max_input_bytes`
    /// refuses every visit. The builder refuses such settings.
    pub fn check(&self) -> Vec<SettingsError> {
        let mut errors = Vec::new();
        if self.jq_deadline.is_zero() {
            errors.push(SettingsError::Zero {
                name: "jq_deadline",
                why: "every door expression would overrun it and break its door",
            });
        }
        if self.waiting_retention.is_zero() {
            errors.push(SettingsError::Zero {
                name: WAITING_RETENTION,
                why: "every waiting outcome would be dropped before it could be taken",
            });
        }
        if self.max_input_bytes == 0 {
            errors.push(SettingsError::Zero {
                name: "max_input_bytes",
                why: "every door visit's input would be refused as too large",
            });
        }
        errors
    }

    /// The defaults overridden by the process environment.
    pub fn from_env() -> Result<Self, Vec<SettingsError>> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }
}
