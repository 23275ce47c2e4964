//! `--output-format json`: one pretty-printed object on stdout at the end of a successful run,
//! or a fatal error object on **stderr** (sometimes twice, the second copy prefixed `[ERROR] `).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// Success object (stdout): `{"session_id","response","stats","error"?,"warnings"?}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JsonSuccess {
    pub session_id: String,
    /// Text of the last model turn only (text before a tool call is not included).
    pub response: String,
    pub stats: SessionStats,
    /// Only for invalid streams (`{"type":"INVALID_STREAM","message"}`); the process exits 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<JsonError>,
    /// e.g. `["Loop detected, stopping execution"]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warnings: Option<Vec<String>>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Fatal error object (stderr): `{"session_id","error":{"type","message","code"}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JsonFatal {
    pub session_id: String,
    pub error: JsonError,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `{"type","message","code"?}`. For API errors `code` is the HTTP status and `message` the raw
/// API error JSON; for CLI errors `code` is the exit code (41 auth, 53 turn limit, ...).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JsonError {
    #[serde(rename = "type")]
    pub kind: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<i64>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Session metrics: `{"models","tools","files"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionStats {
    #[serde(default)]
    pub models: BTreeMap<String, Value>,
    #[serde(default)]
    pub tools: Value,
    #[serde(default)]
    pub files: Value,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Finds the first fatal error object in a JSON-mode stderr text, skipping log lines around it.
pub fn find_fatal_error(stderr: &str) -> Option<JsonFatal> {
    let mut offset = 0;
    for line in stderr.split_inclusive('\n') {
        let start = offset;
        offset += line.len();
        let trimmed = line.trim_end();
        let candidate = if trimmed == "{" {
            &stderr[start..]
        } else if trimmed == "[ERROR] {" {
            &stderr[start + "[ERROR] ".len()..]
        } else {
            continue;
        };
        let mut objects = serde_json::Deserializer::from_str(candidate).into_iter::<JsonFatal>();
        if let Some(Ok(fatal)) = objects.next() {
            return Some(fatal);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_fatal_object_between_log_lines() {
        let stderr = "Error when talking to Gemini API {\"error\":1}\n  status: 400\n}\n{\n  \"session_id\": \"s\",\n  \"error\": {\n    \"type\": \"Error\",\n    \"message\": \"m\",\n    \"code\": 400\n  }\n}\n";
        let fatal = find_fatal_error(stderr).expect("fatal object");
        assert_eq!(fatal.error.code, Some(400));
        assert_eq!(fatal.session_id, "s");
    }

    #[test]
    fn no_object_means_none() {
        assert!(find_fatal_error("YOLO mode is enabled.\n{ broken\n").is_none());
    }
}
