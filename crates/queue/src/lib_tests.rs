//! Unit tests of the queue's pure parts; the queue against a real server is in `tests/`.

use super::*;

#[test]
fn states_round_trip_and_only_two_are_open() {
    for state in [
        TaskState::Queued,
        TaskState::Running,
        TaskState::Succeeded,
        TaskState::Failed,
        TaskState::Cancelled,
    ] {
        assert_eq!(TaskState::parse(state.as_str()).unwrap(), state);
        assert_eq!(
            serde_json::to_value(state).unwrap(),
            serde_json::json!(state.as_str())
        );
        assert_eq!(
            state.is_final(),
            !matches!(state, TaskState::Queued | TaskState::Running)
        );
    }
    assert!(TaskState::parse("abandoned").is_err());
}

#[test]
fn migrations_are_ordered_and_end_at_the_schema_version() {
    let versions: Vec<i64> = schema::MIGRATIONS.iter().map(|(v, _)| *v).collect();
    let expected: Vec<i64> = (1..=schema::SCHEMA_VERSION).collect();
    assert_eq!(versions, expected);
}
