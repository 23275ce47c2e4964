//! The gateway's verdict on a run's main exchanges (the agent's streamed turns): how the last
//! one ended, for the host to type the run's outcome from its own evidence
//! (`switchyard_events::verdict`). Messages are kept as the guest was told them: redacted.

use std::sync::Mutex;

use switchyard_events::verdict::{ExchangeEnd, Failure, Verdict};
use switchyard_records::Redactor;
use switchyard_records::model::TypedError;
use switchyard_translate::turn::TurnChunk;

/// The verdict of one gateway.
#[derive(Debug)]
pub(crate) struct Verdicts {
    state: Mutex<Verdict>,
    redactor: Redactor,
}

impl Verdicts {
    pub fn new(redactor: Redactor) -> Self {
        Self {
            state: Mutex::new(Verdict::default()),
            redactor,
        }
    }

    /// A main exchange ended: what it delivered, its error, the last upstream status.
    pub fn ended(&self, delivered: &[TurnChunk], error: Option<&TypedError>, status: Option<u16>) {
        let end = match error {
            None => ExchangeEnd::Answered {
                calls: delivered.iter().map(|c| c.calls().count()).sum(),
            },
            Some(error) => {
                let failure = failure_of(&error.kind);
                let mut message = error.message.clone();
                self.redactor.redact_string(&mut message);
                ExchangeEnd::Failed {
                    failure,
                    http_status: status.filter(|s| failure == Failure::Upstream && *s >= 400),
                    message,
                }
            }
        };
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        state.exchanges += 1;
        state.last = Some(end);
    }

    pub fn snapshot(&self) -> Verdict {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

/// Whose failure an exchange's error kind is (the kinds `exchange` and
/// `upstream::UpstreamError::kind` give).
fn failure_of(kind: &str) -> Failure {
    match kind {
        "malformed_function_call" | "undeliverable_turn" | "answer_limit" => Failure::ModelOutput,
        kind if kind.starts_with("upstream_") => Failure::Upstream,
        _ => Failure::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_translate::turn::{ToolCall, TurnPart};

    fn error(kind: &str, message: &str) -> TypedError {
        TypedError {
            kind: kind.into(),
            message: message.into(),
        }
    }

    #[test]
    fn the_last_main_exchange_is_kept_with_its_failure_typed_and_redacted() {
        let verdicts = Verdicts::new(Redactor::new(["sk-secret-key"]));
        let mut turn = TurnChunk::new("m", "r");
        turn.parts.push(TurnPart::Call(ToolCall {
            id: "c".into(),
            upstream_id: None,
            kind: Default::default(),
            namespace: None,
            name: "f".into(),
            arguments: serde_json::json!({}),
            signature: None,
        }));
        verdicts.ended(&[turn], None, Some(200));
        assert_eq!(
            verdicts.snapshot().last,
            Some(ExchangeEnd::Answered { calls: 1 })
        );
        verdicts.ended(
            &[],
            Some(&error("upstream_status", "401 for key sk-secret-key")),
            Some(401),
        );
        let Verdict { exchanges, last } = verdicts.snapshot();
        assert_eq!(exchanges, 2);
        let Some(ExchangeEnd::Failed {
            failure,
            http_status,
            message,
        }) = last
        else {
            panic!("failed");
        };
        assert_eq!((failure, http_status), (Failure::Upstream, Some(401)));
        assert!(!message.contains("sk-secret-key"), "{message}");
        verdicts.ended(
            &[],
            Some(&error("malformed_function_call", "bad")),
            Some(200),
        );
        assert!(matches!(
            verdicts.snapshot().last,
            Some(ExchangeEnd::Failed {
                failure: Failure::ModelOutput,
                http_status: None,
                ..
            })
        ));
        verdicts.ended(&[], Some(&error("guest_disconnected", "gone")), None);
        assert!(matches!(
            verdicts.snapshot().last,
            Some(ExchangeEnd::Failed {
                failure: Failure::Other,
                ..
            })
        ));
    }
}
