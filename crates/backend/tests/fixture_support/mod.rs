//! Helpers for the fixture replay tests (`acp_fixtures`, `opencode_fixtures`): reading a
//! captured scenario's files and checking a replay against its stored expectation.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)] // each test binary uses a subset

use std::path::{Path, PathBuf};

use serde_json::Value;
use switchyard_events::{Event, RunOutcome};

/// `fixtures/<relative>` of the repository.
pub fn fixtures(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(relative)
}

pub fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(str::to_owned)
        .collect()
}

pub fn json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// Every line of `path`, parsed.
pub fn parsed<T: serde::de::DeserializeOwned>(path: &Path) -> Vec<T> {
    lines(path)
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A scenario's replayed events and outcome.
pub struct Replayed {
    pub events: Vec<Event>,
    pub outcome: RunOutcome,
}

impl Replayed {
    /// Asserts that this replay of the scenario in `dir` is exactly its `expected.jsonl` and
    /// `outcome.json`.
    pub fn checked(self, dir: &Path, name: &str) -> Self {
        let got: Vec<Value> = self
            .events
            .iter()
            .map(|e| serde_json::to_value(e).unwrap())
            .collect();
        let expected: Vec<Value> = parsed(&dir.join("expected.jsonl"));
        assert_eq!(got, expected, "{name}: canonical sequence differs");
        let stored: RunOutcome = serde_json::from_value(json(&dir.join("outcome.json"))).unwrap();
        assert_eq!(self.outcome, stored, "{name}: outcome differs");
        self
    }

    pub fn of<'a, T>(&'a self, pick: impl Fn(&'a Event) -> Option<&'a T>) -> Vec<&'a T> {
        self.events.iter().filter_map(pick).collect()
    }
}
