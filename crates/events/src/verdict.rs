//! The host's verdict on a run's model traffic: what its own gateway saw of the agent's main
//! exchanges (the streamed turns of its loop), and how that types the run's outcome the same
//! way for every agent ([`apply`]).
//!
//! A guest reports its own view of a run, and that view can be wrong: a guest may end a prompt
//! "successfully" when the model's answer never reached it, or call a failure the gateway gave
//! up on a failure of its own. The gateway's record wins:
//! - an outcome the guest calls a success fails when the last main exchange failed, when it
//!   delivered calls but never the model's final answer, or when there was no main exchange;
//!   in a session, the same holds for every prompt the guest says it answered ([`apply_prompts`]:
//!   each prompt is judged by the main exchanges that ended while it ran);
//! - a failure of the guest's (not a stop of the host's: cancel, timeouts, crashes) is typed
//!   from the gateway's last failed exchange: `api` for a provider failure, `model_output` for
//!   a turn whose calls could not be delivered.

use serde::{Deserialize, Serialize};

use crate::outcome::{ErrorKind, OutcomeStatus, RunError, RunOutcome, StopCause};

/// What the gateway saw. Derived: the host's own record.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    /// Main exchanges that ended.
    pub exchanges: u64,
    /// How the last of them ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last: Option<ExchangeEnd>,
}

/// How one main exchange ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "end", rename_all = "snake_case")]
pub enum ExchangeEnd {
    /// The model's answer was delivered: its text, or `calls` calls.
    Answered { calls: usize },
    /// The exchange failed.
    Failed {
        failure: Failure,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        http_status: Option<u16>,
        /// As the guest was told it (redacted).
        message: String,
    },
}

/// Whose failure an exchange's was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Failure {
    /// The provider failed, or the gateway gave up on it.
    Upstream,
    /// The model's turn could not be delivered (a malformed call, after retries).
    ModelOutput,
    /// Neither: the guest went away, the gateway shut down, the guest's request was refused.
    Other,
}

impl Verdict {
    /// What the gateway saw after `before`: the exchanges that ended since, and the last of
    /// them (none when none ended).
    pub fn since(&self, before: &Verdict) -> Verdict {
        let exchanges = self.exchanges.saturating_sub(before.exchanges);
        Verdict {
            exchanges,
            last: self.last.clone().filter(|_| exchanges > 0),
        }
    }

    /// Why a success the guest reported does not stand on this verdict, if it does not.
    fn unanswered(&self) -> Option<RunError> {
        match &self.last {
            None => Some(RunError::new(
                ErrorKind::ModelOutput,
                "the guest reported success, but no model answer ever reached it",
            )),
            Some(ExchangeEnd::Answered { calls: 0 }) => None,
            Some(ExchangeEnd::Answered { .. }) => Some(RunError::new(
                ErrorKind::ModelOutput,
                "the guest reported success, but the model's final answer never reached it: \
                 its last delivered answer was tool calls",
            )),
            Some(ExchangeEnd::Failed { .. }) => self.failure().or_else(|| {
                Some(RunError::new(
                    ErrorKind::GuestFailure,
                    "the guest reported success, but its last model exchange did not end",
                ))
            }),
        }
    }

    /// The error the last exchange's failure amounts to, when it was the provider's or the
    /// model's.
    fn failure(&self) -> Option<RunError> {
        let Some(ExchangeEnd::Failed {
            failure,
            http_status,
            message,
        }) = &self.last
        else {
            return None;
        };
        let kind = match failure {
            Failure::Upstream => ErrorKind::Api {
                http_status: *http_status,
            },
            Failure::ModelOutput => ErrorKind::ModelOutput,
            Failure::Other => return None,
        };
        Some(RunError::new(
            kind,
            format!("the gateway's last model exchange failed: {message}"),
        ))
    }
}

/// Types `outcome` from the gateway's `verdict` (see the module docs).
pub fn apply(mut outcome: RunOutcome, verdict: &Verdict) -> RunOutcome {
    match outcome.status {
        OutcomeStatus::Succeeded => {
            if let Some(error) = verdict.unanswered() {
                outcome.status = OutcomeStatus::Failed;
                outcome.error = Some(error);
            }
        }
        OutcomeStatus::Failed | OutcomeStatus::Incomplete => {
            if guests_own_failure(&outcome)
                && let Some(error) = verdict.failure()
            {
                outcome.status = OutcomeStatus::Failed;
                outcome.error = Some(error);
            }
        }
        _ => {}
    }
    outcome
}

/// A failure of the guest's own, not a stop of the host's (Switchyard closing a guest whose work
/// was done is none).
fn guests_own_failure(outcome: &RunOutcome) -> bool {
    let exit = outcome.exit;
    let not_stopped = match exit.stopped_by {
        None => exit.signal.is_none(),
        Some(cause) => cause == StopCause::Closed,
    };
    not_stopped
        && outcome.error.as_ref().is_some_and(|e| {
            matches!(
                e.kind,
                ErrorKind::GuestFailure
                    | ErrorKind::ModelOutput
                    | ErrorKind::Api { .. }
                    | ErrorKind::MissingResult { .. }
                    | ErrorKind::UnexpectedExit { .. }
            )
        })
}

/// What the gateway saw while one prompt of a session ran. Derived: the host's own record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptVerdict {
    /// 0-based, as in `prompt_finished`.
    pub prompt: u32,
    /// The guest ended the prompt with an error of its own.
    pub guest_failed: bool,
    /// The main exchanges that ended between the prompt's sending and its end.
    pub verdict: Verdict,
}

/// Types a session's `outcome` from each of its prompts' verdicts, then from the `whole` run's
/// ([`apply`]). A success fails on the first prompt the guest says it answered whose model
/// answer never reached it; a guest's own failure is typed from the gateway's evidence for the
/// first prompt that failed.
pub fn apply_prompts(
    mut outcome: RunOutcome,
    prompts: &[PromptVerdict],
    whole: &Verdict,
) -> RunOutcome {
    match outcome.status {
        OutcomeStatus::Succeeded => {
            let unanswered = prompts.iter().find_map(|p| {
                let error = p.verdict.unanswered().filter(|_| !p.guest_failed)?;
                Some(RunError::new(
                    error.kind,
                    format!("prompt {}: {}", p.prompt + 1, error.message),
                ))
            });
            if let Some(error) = unanswered {
                outcome.status = OutcomeStatus::Failed;
                outcome.error = Some(error);
                return outcome;
            }
        }
        OutcomeStatus::Failed | OutcomeStatus::Incomplete => {
            // The guest's failure is its first failed prompt's, judged by that prompt's own
            // exchanges (not a later prompt's).
            if let Some(first) = prompts.iter().find(|p| p.guest_failed) {
                if guests_own_failure(&outcome)
                    && let Some(error) = first.verdict.failure()
                {
                    outcome.status = OutcomeStatus::Failed;
                    outcome.error = Some(RunError::new(
                        error.kind,
                        format!("prompt {}: {}", first.prompt + 1, error.message),
                    ));
                }
                return outcome;
            }
        }
        _ => {}
    }
    apply(outcome, whole)
}

#[cfg(test)]
#[path = "verdict_tests.rs"]
mod tests;
