use super::*;
use crate::outcome::GuestExit;

fn outcome(status: OutcomeStatus, error: Option<ErrorKind>) -> RunOutcome {
    RunOutcome {
        status,
        error: error.map(|kind| RunError::new(kind, "the guest's words")),
        exit: GuestExit {
            code: Some(0),
            signal: None,
            stopped_by: None,
        },
        result: None,
        incomplete_cleanup: Vec::new(),
    }
}

fn verdict(last: Option<ExchangeEnd>) -> Verdict {
    Verdict {
        exchanges: u64::from(last.is_some()),
        last,
    }
}

fn failed(failure: Failure, http_status: Option<u16>) -> Option<ExchangeEnd> {
    Some(ExchangeEnd::Failed {
        failure,
        http_status,
        message: "upstream failed".into(),
    })
}

#[test]
fn a_success_stands_only_on_a_delivered_final_answer() {
    let ok = outcome(OutcomeStatus::Succeeded, None);
    let answered = verdict(Some(ExchangeEnd::Answered { calls: 0 }));
    assert_eq!(apply(ok.clone(), &answered), ok);
    for (last, kind) in [
        (None, ErrorKind::ModelOutput),
        (
            Some(ExchangeEnd::Answered { calls: 2 }),
            ErrorKind::ModelOutput,
        ),
        (failed(Failure::ModelOutput, None), ErrorKind::ModelOutput),
        (
            failed(Failure::Upstream, Some(503)),
            ErrorKind::Api {
                http_status: Some(503),
            },
        ),
        (failed(Failure::Other, None), ErrorKind::GuestFailure),
    ] {
        let concluded = apply(ok.clone(), &verdict(last.clone()));
        assert_eq!(concluded.status, OutcomeStatus::Failed, "{last:?}");
        assert_eq!(concluded.error.map(|e| e.kind), Some(kind), "{last:?}");
    }
}

#[test]
fn a_guests_own_failure_is_typed_from_the_gateway() {
    let guest = outcome(OutcomeStatus::Failed, Some(ErrorKind::GuestFailure));
    let concluded = apply(guest.clone(), &verdict(failed(Failure::Upstream, None)));
    assert_eq!(
        concluded.error.map(|e| e.kind),
        Some(ErrorKind::Api { http_status: None })
    );
    // A last exchange that answered leaves the guest's own failure as it is.
    let answered = verdict(Some(ExchangeEnd::Answered { calls: 0 }));
    assert_eq!(apply(guest.clone(), &answered), guest);
    // A host's stop is never retyped.
    let mut cancelled = outcome(OutcomeStatus::Cancelled, Some(ErrorKind::Cancelled));
    cancelled.exit.stopped_by = Some(StopCause::Cancelled);
    assert_eq!(
        apply(cancelled.clone(), &verdict(failed(Failure::Upstream, None))),
        cancelled
    );
    let mut timed_out = outcome(OutcomeStatus::Failed, Some(ErrorKind::GuestFailure));
    timed_out.exit.stopped_by = Some(StopCause::Timeout);
    assert_eq!(
        apply(timed_out.clone(), &verdict(failed(Failure::Upstream, None))),
        timed_out
    );
    // A guest closed by the host once its work was done still had its own failure.
    let mut closed = outcome(OutcomeStatus::Failed, Some(ErrorKind::GuestFailure));
    closed.exit = GuestExit {
        code: None,
        signal: Some(15),
        stopped_by: Some(StopCause::Closed),
    };
    assert_eq!(
        apply(closed, &verdict(failed(Failure::ModelOutput, None)))
            .error
            .map(|e| e.kind),
        Some(ErrorKind::ModelOutput)
    );
}

fn prompt(index: u32, guest_failed: bool, last: Option<ExchangeEnd>) -> PromptVerdict {
    PromptVerdict {
        prompt: index,
        guest_failed,
        verdict: verdict(last),
    }
}

#[test]
fn a_verdict_since_an_earlier_one_holds_only_what_ended_after_it() {
    let before = Verdict {
        exchanges: 2,
        last: Some(ExchangeEnd::Answered { calls: 0 }),
    };
    assert_eq!(before.since(&before), Verdict::default());
    let after = Verdict {
        exchanges: 3,
        last: failed(Failure::Upstream, Some(500)),
    };
    assert_eq!(
        after.since(&before),
        Verdict {
            exchanges: 1,
            last: failed(Failure::Upstream, Some(500)),
        }
    );
}

#[test]
fn a_session_succeeds_only_when_every_prompt_it_answered_got_its_answer() {
    let ok = outcome(OutcomeStatus::Succeeded, None);
    let answered = || Some(ExchangeEnd::Answered { calls: 0 });
    let whole = verdict(answered());
    let good = [prompt(0, false, answered()), prompt(1, false, answered())];
    assert_eq!(apply_prompts(ok.clone(), &good, &whole), ok);
    // The first prompt's answer never came; the second's did: the run is no success, and the
    // error names the prompt.
    for (first, kind) in [
        (None, ErrorKind::ModelOutput),
        (
            Some(ExchangeEnd::Answered { calls: 1 }),
            ErrorKind::ModelOutput,
        ),
        (
            failed(Failure::Upstream, Some(502)),
            ErrorKind::Api {
                http_status: Some(502),
            },
        ),
    ] {
        let prompts = [
            prompt(0, false, first.clone()),
            prompt(1, false, answered()),
        ];
        let concluded = apply_prompts(ok.clone(), &prompts, &whole);
        assert_eq!(concluded.status, OutcomeStatus::Failed, "{first:?}");
        let error = concluded.error.unwrap();
        assert_eq!(error.kind, kind, "{first:?}");
        assert!(error.message.starts_with("prompt 1: "), "{}", error.message);
    }
    // With no prompts (headless) the whole run's verdict decides, as `apply`.
    assert_eq!(
        apply_prompts(ok.clone(), &[], &verdict(None)).status,
        OutcomeStatus::Failed
    );
}

#[test]
fn a_sessions_failure_is_typed_from_its_first_failed_prompt() {
    let own = outcome(OutcomeStatus::Failed, Some(ErrorKind::GuestFailure));
    let answered = || Some(ExchangeEnd::Answered { calls: 0 });
    // Prompt 1 failed on the provider, prompt 2 was answered: `api`, from prompt 1.
    let prompts = [
        prompt(0, true, failed(Failure::Upstream, Some(503))),
        prompt(1, false, answered()),
    ];
    let concluded = apply_prompts(own.clone(), &prompts, &verdict(answered()));
    assert_eq!(
        concluded.error.map(|e| e.kind),
        Some(ErrorKind::Api {
            http_status: Some(503)
        })
    );
    // Prompt 1 failed with the gateway seeing nothing wrong: a later prompt's failure does not
    // retype it.
    let prompts = [
        prompt(0, true, answered()),
        prompt(1, false, failed(Failure::Upstream, Some(500))),
    ];
    let concluded = apply_prompts(
        own.clone(),
        &prompts,
        &verdict(failed(Failure::Upstream, Some(500))),
    );
    assert_eq!(concluded, own);
}
