use super::*;

#[test]
fn the_raw_line_budget_stores_a_prefix_and_counts_the_rest() {
    let mut budget = RawLineBudget {
        lines_left: 3,
        bytes_left: 10,
        ..RawLineBudget::default()
    };
    assert!(budget.admit("abcd"));
    assert!(budget.admit("efgh"));
    // 2 bytes left: this line does not fit, and nothing after it is stored.
    assert!(!budget.admit("ijk"));
    assert!(!budget.admit("l"));
    assert_eq!(budget.dropped, 2);

    let mut by_count = RawLineBudget {
        lines_left: 2,
        bytes_left: 1_000,
        ..RawLineBudget::default()
    };
    assert!(by_count.admit("a") && by_count.admit("b"));
    assert!(!by_count.admit("c"));
    assert_eq!(by_count.dropped, 1);
    let default = RawLineBudget::default();
    assert_eq!(
        (default.lines_left, default.bytes_left),
        (MAX_RAW_LINES, MAX_RAW_BYTES)
    );
}

#[test]
fn each_prompt_is_judged_by_the_exchanges_that_ended_while_it_ran() {
    use switchyard_events::event::{PromptFinished, UserMessage};
    use switchyard_events::verdict::ExchangeEnd;
    let at = |exchanges, last| Verdict {
        exchanges,
        last: Some(last),
    };
    let sent = Event::UserMessage(UserMessage { text: "p".into() });
    let finished = |prompt, failed: bool| {
        Event::PromptFinished(PromptFinished {
            prompt,
            stop_reason: Some("end_turn".into()),
            error: failed.then(|| {
                switchyard_events::RunError::new(switchyard_events::ErrorKind::GuestFailure, "x")
            }),
            final_text: None,
        })
    };
    let mut judge = PromptJudge::default();
    judge.observe(&sent, Verdict::default);
    judge.observe(&finished(0, false), || {
        at(2, ExchangeEnd::Answered { calls: 0 })
    });
    // The second prompt's exchanges: none ended while it ran.
    judge.observe(&sent, || at(2, ExchangeEnd::Answered { calls: 0 }));
    judge.observe(&finished(1, true), || {
        at(2, ExchangeEnd::Answered { calls: 0 })
    });
    assert_eq!(judge.judged.len(), 2);
    assert_eq!(
        judge.judged[0].verdict,
        at(2, ExchangeEnd::Answered { calls: 0 })
    );
    assert!(!judge.judged[0].guest_failed);
    assert_eq!(judge.judged[1].verdict, Verdict::default());
    assert!(judge.judged[1].guest_failed);
    assert_eq!(judge.judged[1].prompt, 1);
}
