//! Typed run outcomes: every way a guest can end (success, model failure, API error, limits,
//! crash, signal, hang, missing final event) maps to one [`RunOutcome`].
//!
//! Gemini CLI rules (0.61.0, from fixtures): a `result` line is the only proof of completion;
//! `result.status:"error"` with exit 0 is a model-level failure (invalid stream, safety); API
//! errors exit with `HTTP status & 0xFF`; signals make the CLI exit 0 *without* a `result`.

use serde::{Deserialize, Serialize};
use switchyard_protocol::gemini_cli::exit::ExitClass;
use switchyard_protocol::gemini_cli::stream_json::{ResultEvent, Status};

/// Why Switchyard itself stopped the guest, if it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopCause {
    /// The host cancelled the run.
    Cancelled,
    /// The overall run timeout expired.
    Timeout,
    /// No output for longer than the inactivity limit.
    Inactivity,
    /// The guest's work was done (every prompt answered) and Switchyard closed it: its exit
    /// status says nothing about the run.
    Closed,
}

/// How the guest process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct GuestExit {
    /// Exit code, for a normal exit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<i32>,
    /// Signal number, when killed by a signal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// Set when Switchyard stopped the guest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_by: Option<StopCause>,
}

/// The coarse result of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutcomeStatus {
    Succeeded,
    Failed,
    Cancelled,
    TimedOut,
    /// The guest ended without its terminal event.
    Incomplete,
}

/// What went wrong, typed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ErrorKind {
    /// The model's output was unusable (empty, blocked by safety, malformed call...).
    ModelOutput,
    /// The model API failed (after the guest's retries). `http_status` when known.
    Api { http_status: Option<u16> },
    /// The guest's turn limit was reached.
    TurnLimit,
    /// Authentication was missing or invalid (exit 41).
    Auth,
    /// The prompt or session input was invalid (exit 42).
    Input,
    /// The guest's settings were invalid (exit 52).
    Config,
    /// The workspace was not trusted (exit 55).
    UntrustedWorkspace,
    /// Sandbox failure (exit 44).
    Sandbox,
    /// A fatal tool error, e.g. no space left (exit 54).
    FatalTool,
    /// The guest rejected its arguments or failed generically (exit 1 without a result).
    GuestFailure,
    /// Cancelled by the host.
    Cancelled,
    /// The overall timeout expired.
    Timeout,
    /// The guest produced no output for too long.
    Inactivity,
    /// Killed by a signal Switchyard did not send.
    Crashed { signal: i32 },
    /// The guest exited (code given) without its terminal event.
    MissingResult { code: Option<i32> },
    /// The run had a finish schema and ended without a valid `finish` call.
    NoFinish,
    /// The recorded session to resume could not be loaded.
    Resume,
    /// An exit code this version does not document.
    UnexpectedExit { code: i32 },
}

impl ErrorKind {
    /// Whether running the same task again may succeed without changing anything.
    pub fn retryable(&self) -> bool {
        match self {
            ErrorKind::ModelOutput
            | ErrorKind::NoFinish
            | ErrorKind::Inactivity
            | ErrorKind::Timeout => true,
            ErrorKind::Api { http_status } => {
                matches!(http_status, None | Some(408 | 429 | 499 | 500..=599))
            }
            ErrorKind::Crashed { .. } | ErrorKind::MissingResult { .. } => true,
            _ => false,
        }
    }
}

/// A typed error with the guest's own message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunError {
    #[serde(flatten)]
    pub kind: ErrorKind,
    /// Source: `result.error.message`, the last `error` event, the JSON-mode fatal object, or a
    /// Switchyard message for conditions it detected itself.
    pub message: String,
    /// Derived: see [`ErrorKind::retryable`].
    pub retryable: bool,
}

impl RunError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        let retryable = kind.retryable();
        RunError {
            kind,
            message: message.into(),
            retryable,
        }
    }
}

/// The typed end of a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunOutcome {
    pub status: OutcomeStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RunError>,
    pub exit: GuestExit,
    /// Derived: the arguments of the run's valid `finish` call (runs with a finish schema).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<serde_json::Value>,
    /// Derived: host calls still running when the run's cleanup gave up waiting for them (the
    /// model's call ids); empty when the cleanup was complete.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub incomplete_cleanup: Vec<String>,
}

/// What the host contract adds to the guest's own outcome (see [`conclude`]).
#[derive(Debug, Clone, Default)]
pub struct HostConclusion {
    /// The run had a finish schema: success needs a valid finish.
    pub finish_required: bool,
    /// The valid finish call's arguments, if one was made.
    pub result: Option<serde_json::Value>,
    /// An exchange that ended with a provider error the guest was given (its message).
    pub provider_error: Option<(Option<u16>, String)>,
}

/// Applies the host contract: a run with a finish schema succeeds only with a valid finish, a
/// normal guest exit and no provider error. The result is carried whatever the status.
pub fn conclude(mut outcome: RunOutcome, host: &HostConclusion) -> RunOutcome {
    outcome.result = host.result.clone();
    if outcome.status != OutcomeStatus::Succeeded || !host.finish_required {
        return outcome;
    }
    if let Some((http_status, message)) = &host.provider_error {
        outcome.status = OutcomeStatus::Failed;
        outcome.error = Some(RunError::new(
            ErrorKind::Api {
                http_status: *http_status,
            },
            format!("the provider failed during the run: {message}"),
        ));
    } else if host.result.is_none() {
        outcome.status = OutcomeStatus::Failed;
        outcome.error = Some(RunError::new(
            ErrorKind::NoFinish,
            "the guest ended without a valid finish call",
        ));
    }
    outcome
}

/// Classifies a Gemini CLI run from its `result` event (if any), the last `error` event message
/// (if any) and the process exit.
pub fn classify_gemini(
    result: Option<&ResultEvent>,
    last_error_message: Option<&str>,
    exit: GuestExit,
) -> RunOutcome {
    let outcome = |status, error| RunOutcome {
        status,
        error,
        exit,
        result: None,
        incomplete_cleanup: Vec::new(),
    };
    if let Some(stopped) = stopped_or_crashed(exit) {
        return stopped;
    }
    let code = exit.code;
    let class = code.map(ExitClass::from_code);
    match result {
        Some(r) if r.status == Status::Success && code == Some(0) => {
            outcome(OutcomeStatus::Succeeded, None)
        }
        Some(r) => {
            let message = r
                .error
                .as_ref()
                .map(|e| e.message.clone())
                .or_else(|| last_error_message.map(str::to_owned))
                .unwrap_or_else(|| "guest reported an error without a message".to_owned());
            let kind = match class {
                Some(ExitClass::Zero) if r.status == Status::Error => ErrorKind::ModelOutput,
                Some(ExitClass::TurnLimit) => ErrorKind::TurnLimit,
                Some(ExitClass::ApiStatus { http_status }) => ErrorKind::Api {
                    http_status: Some(http_status),
                },
                Some(ExitClass::FatalTool) => ErrorKind::FatalTool,
                // Exit 1 with an error result: the model stream could not be read (e.g. bad SSE
                // JSON) or the model was not found.
                Some(ExitClass::General) => ErrorKind::Api { http_status: None },
                other => kind_from_exit_class(other, code),
            };
            outcome(OutcomeStatus::Failed, Some(RunError::new(kind, message)))
        }
        None => {
            let kind = match class {
                Some(ExitClass::Zero) | None => ErrorKind::MissingResult { code },
                Some(ExitClass::ApiStatus { http_status }) => ErrorKind::Api {
                    http_status: Some(http_status),
                },
                other => kind_from_exit_class(other, code),
            };
            let status = match kind {
                ErrorKind::MissingResult { .. } => OutcomeStatus::Incomplete,
                _ => OutcomeStatus::Failed,
            };
            let message = last_error_message
                .map(str::to_owned)
                .unwrap_or_else(|| match code {
                    Some(c) => format!("guest exited with code {c} without a result event"),
                    None => "guest ended without a result event".to_owned(),
                });
            outcome(status, Some(RunError::new(kind, message)))
        }
    }
}

/// Switchyard's own stop decisions, and a signal it did not send, decide the outcome whatever
/// the guest said: its exit after a signal says nothing.
pub fn stopped_or_crashed(exit: GuestExit) -> Option<RunOutcome> {
    let outcome = |status, error| RunOutcome {
        status,
        error: Some(error),
        exit,
        result: None,
        incomplete_cleanup: Vec::new(),
    };
    if let Some(cause) = exit.stopped_by {
        let (status, kind, msg) = match cause {
            StopCause::Closed => return None,
            StopCause::Cancelled => (
                OutcomeStatus::Cancelled,
                ErrorKind::Cancelled,
                "run cancelled by the host",
            ),
            StopCause::Timeout => (
                OutcomeStatus::TimedOut,
                ErrorKind::Timeout,
                "run exceeded its timeout",
            ),
            StopCause::Inactivity => (
                OutcomeStatus::TimedOut,
                ErrorKind::Inactivity,
                "guest produced no output within the inactivity limit",
            ),
        };
        return Some(outcome(status, RunError::new(kind, msg)));
    }
    exit.signal.map(|signal| {
        outcome(
            OutcomeStatus::Failed,
            RunError::new(
                ErrorKind::Crashed { signal },
                format!("guest killed by signal {signal}"),
            ),
        )
    })
}

fn kind_from_exit_class(class: Option<ExitClass>, code: Option<i32>) -> ErrorKind {
    match class {
        Some(ExitClass::Auth) => ErrorKind::Auth,
        Some(ExitClass::Input) => ErrorKind::Input,
        Some(ExitClass::Config) => ErrorKind::Config,
        Some(ExitClass::UntrustedWorkspace) => ErrorKind::UntrustedWorkspace,
        Some(ExitClass::Sandbox) => ErrorKind::Sandbox,
        Some(ExitClass::TurnLimit) => ErrorKind::TurnLimit,
        Some(ExitClass::FatalTool) => ErrorKind::FatalTool,
        Some(ExitClass::General) => ErrorKind::GuestFailure,
        Some(ExitClass::Cancelled) => ErrorKind::Cancelled,
        Some(ExitClass::ApiStatus { http_status }) => ErrorKind::Api {
            http_status: Some(http_status),
        },
        Some(ExitClass::Zero) | None => ErrorKind::MissingResult { code },
        Some(ExitClass::Other { code }) => ErrorKind::UnexpectedExit { code },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exit(code: i32) -> GuestExit {
        GuestExit {
            code: Some(code),
            ..Default::default()
        }
    }

    #[test]
    fn signal_exit_zero_without_result_is_incomplete() {
        let o = classify_gemini(None, None, exit(0));
        assert_eq!(o.status, OutcomeStatus::Incomplete);
        assert_eq!(
            o.error.unwrap().kind,
            ErrorKind::MissingResult { code: Some(0) }
        );
    }

    #[test]
    fn host_stop_wins_over_exit_code() {
        let o = classify_gemini(
            None,
            None,
            GuestExit {
                code: Some(0),
                signal: None,
                stopped_by: Some(StopCause::Inactivity),
            },
        );
        assert_eq!(o.status, OutcomeStatus::TimedOut);
        assert_eq!(o.error.unwrap().kind, ErrorKind::Inactivity);
    }

    #[test]
    fn exit_codes_without_result() {
        for (code, kind) in [
            (41, ErrorKind::Auth),
            (42, ErrorKind::Input),
            (52, ErrorKind::Config),
            (55, ErrorKind::UntrustedWorkspace),
            (1, ErrorKind::GuestFailure),
            (
                173,
                ErrorKind::Api {
                    http_status: Some(429),
                },
            ),
            (9, ErrorKind::UnexpectedExit { code: 9 }),
        ] {
            let o = classify_gemini(None, None, exit(code));
            assert_eq!(o.status, OutcomeStatus::Failed, "{code}");
            assert_eq!(o.error.unwrap().kind, kind, "{code}");
        }
    }

    #[test]
    fn crash_by_signal() {
        let o = classify_gemini(
            None,
            None,
            GuestExit {
                code: None,
                signal: Some(9),
                stopped_by: None,
            },
        );
        assert_eq!(o.error.unwrap().kind, ErrorKind::Crashed { signal: 9 });
    }

    #[test]
    fn the_host_contract_needs_a_finish_and_no_provider_error() {
        let succeeded = RunOutcome {
            status: OutcomeStatus::Succeeded,
            error: None,
            exit: GuestExit {
                code: Some(0),
                ..GuestExit::default()
            },
            result: None,
            incomplete_cleanup: Vec::new(),
        };
        let result = serde_json::json!({"colour": "red"});
        let with = |finish_required, result: Option<&serde_json::Value>, provider_error| {
            conclude(
                succeeded.clone(),
                &HostConclusion {
                    finish_required,
                    result: result.cloned(),
                    provider_error,
                },
            )
        };
        let ok = with(true, Some(&result), None);
        assert_eq!(ok.status, OutcomeStatus::Succeeded);
        assert_eq!(ok.result.as_ref(), Some(&result));
        let none = with(true, None, None);
        assert_eq!(none.status, OutcomeStatus::Failed);
        assert_eq!(none.error.unwrap().kind, ErrorKind::NoFinish);
        let provider = with(true, Some(&result), Some((Some(429), "quota".into())));
        assert_eq!(
            provider.error.unwrap().kind,
            ErrorKind::Api {
                http_status: Some(429)
            }
        );
        assert_eq!(
            provider.result.as_ref(),
            Some(&result),
            "the result is kept"
        );
        // Without a finish schema the guest's own outcome stands.
        assert_eq!(with(false, None, None).status, OutcomeStatus::Succeeded);
        // A guest failure is never turned into a success by a finish.
        let failed = RunOutcome {
            status: OutcomeStatus::Failed,
            error: Some(RunError::new(ErrorKind::TurnLimit, "turns")),
            ..succeeded.clone()
        };
        let concluded = conclude(
            failed,
            &HostConclusion {
                finish_required: true,
                result: Some(result.clone()),
                provider_error: None,
            },
        );
        assert_eq!(concluded.status, OutcomeStatus::Failed);
        assert_eq!(concluded.error.unwrap().kind, ErrorKind::TurnLimit);
    }
}
