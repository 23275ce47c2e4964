//! A run abandoned by a queue worker (its lease expired): [`PgStore::mark_run_abandoned`] marks
//! a running or incomplete run, never an ended one, and the abandoned writer's later upserts
//! leave the mark.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use switchyard_records::{
    PgStore, PgUrl, RecordOp, RecordSink, RecordStore, RunState, new_record_id,
};
use switchyard_testkit::postgres::{TestDatabase, skip_message};

#[test]
fn an_abandoned_run_keeps_its_mark_and_an_ended_one_is_left_alone() {
    let db = match TestDatabase::create() {
        Ok(Some(db)) => db,
        Ok(None) => return skip_message("an_abandoned_run_keeps_its_mark"),
        Err(error) => panic!("{error}"),
    };
    let url = PgUrl::parse(db.url()).unwrap();
    let (running, done) = (new_record_id(), new_record_id());
    let mut writer = PgStore::open(&url).unwrap();
    writer
        .apply(&[
            RecordOp::UpsertRun(Box::new(sample_run(running))),
            RecordOp::UpsertRun(Box::new(ended(sample_run(done)))),
        ])
        .unwrap();
    let claimer = PgStore::open(&url).unwrap();
    assert!(claimer.mark_run_abandoned(running).unwrap());
    assert!(!claimer.mark_run_abandoned(done).unwrap());
    assert!(!claimer.mark_run_abandoned(new_record_id()).unwrap());
    // The abandoned writer comes back late and ends its run: the mark stays.
    writer
        .apply(&[RecordOp::UpsertRun(Box::new(ended(sample_run(running))))])
        .unwrap();
    let state = |id| claimer.run(id).unwrap().unwrap().state;
    assert_eq!(state(running), RunState::Abandoned);
    assert_eq!(state(done), RunState::Ended);
}
