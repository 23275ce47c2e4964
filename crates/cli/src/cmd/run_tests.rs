use super::*;
use switchyard_events::{GuestExit, RunError};
use switchyard_runner::Agent;

#[test]
fn every_agent_is_an_agent_flag_value_by_its_name() {
    use clap::ValueEnum;
    assert_eq!(Agent::value_variants(), Agent::ALL);
    for agent in Agent::ALL {
        assert_eq!(
            Agent::from_str(agent.name(), false).ok(),
            Some(agent),
            "the name is the --agent value"
        );
    }
}

#[test]
fn every_outcome_class_has_its_exit_code() {
    let failed = |kind| RunOutcome {
        status: OutcomeStatus::Failed,
        error: Some(RunError::new(kind, "m")),
        exit: GuestExit::default(),
        result: None,
        incomplete_cleanup: Vec::new(),
    };
    assert_eq!(
        exit_code_for(&RunOutcome {
            status: OutcomeStatus::Succeeded,
            error: None,
            exit: GuestExit::default(),
            result: None,
            incomplete_cleanup: Vec::new(),
        }),
        0
    );
    assert_eq!(
        exit_code_for(&failed(ErrorKind::ModelOutput)),
        EXIT_GUEST_FAILED
    );
    assert_eq!(
        exit_code_for(&failed(ErrorKind::Api {
            http_status: Some(429)
        })),
        EXIT_UPSTREAM
    );
    assert_eq!(
        exit_code_for(&failed(ErrorKind::TurnLimit)),
        EXIT_TURN_LIMIT
    );
    assert_eq!(exit_code_for(&failed(ErrorKind::Auth)), EXIT_GUEST_SETUP);
    assert_eq!(
        exit_code_for(&failed(ErrorKind::Crashed { signal: 9 })),
        EXIT_INCOMPLETE
    );
    assert_eq!(exit_code_for(&failed(ErrorKind::NoFinish)), EXIT_NO_RESULT);
    let with_status = |status| RunOutcome {
        status,
        error: None,
        exit: GuestExit::default(),
        result: None,
        incomplete_cleanup: Vec::new(),
    };
    assert_eq!(
        exit_code_for(&with_status(OutcomeStatus::Cancelled)),
        EXIT_CANCELLED
    );
    assert_eq!(
        exit_code_for(&with_status(OutcomeStatus::TimedOut)),
        EXIT_TIMEOUT
    );
    assert_eq!(
        exit_code_for(&with_status(OutcomeStatus::Incomplete)),
        EXIT_INCOMPLETE
    );
}
