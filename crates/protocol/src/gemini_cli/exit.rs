//! Gemini CLI exit codes (0.61.0), as observed and as read in the bundled code.

use serde::{Deserialize, Serialize};

/// What a Gemini CLI exit code means. Codes are only meaningful for a normal exit; a process
/// killed by a signal has no code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ExitClass {
    /// 0: success, but also invalid-stream "error" results, loop detection, tool failures, and
    /// SIGINT/SIGTERM/SIGHUP (graceful shutdown). Read the `result` event to tell them apart.
    Zero,
    /// 1: argument errors, text-mode API errors, malformed SSE from the model, 404 model-not-found.
    General,
    /// 41: authentication (missing key, invalid auth type).
    Auth,
    /// 42: input error (empty prompt, bad `--resume`/`--session-id`/`--session-file`).
    Input,
    /// 44: sandbox error.
    Sandbox,
    /// 52: invalid settings (also "YOLO mode is disabled").
    Config,
    /// 53: `model.maxSessionTurns` reached.
    TurnLimit,
    /// 54: fatal tool error (`no_space_left`).
    FatalTool,
    /// 55: untrusted workspace in headless mode.
    UntrustedWorkspace,
    /// 130: cancellation (TTY Ctrl-C or abort paths).
    Cancelled,
    /// json/stream-json API errors exit with `HTTP status & 0xFF` (400→144, 429→173, 500→244).
    ApiStatus { http_status: u16 },
    /// Any other code.
    Other { code: i32 },
}

impl ExitClass {
    /// Classifies an exit code.
    pub fn from_code(code: i32) -> Self {
        match code {
            0 => ExitClass::Zero,
            1 => ExitClass::General,
            41 => ExitClass::Auth,
            42 => ExitClass::Input,
            44 => ExitClass::Sandbox,
            52 => ExitClass::Config,
            53 => ExitClass::TurnLimit,
            54 => ExitClass::FatalTool,
            55 => ExitClass::UntrustedWorkspace,
            130 => ExitClass::Cancelled,
            // HTTP 400..=511 fold onto 144..=255; no other code of the CLI lives there.
            144..=255 => ExitClass::ApiStatus {
                http_status: (code + 256) as u16,
            },
            other => ExitClass::Other { code: other },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_errors_fold_back_to_http_status() {
        for (code, http) in [(144, 400), (145, 401), (147, 403), (173, 429), (244, 500)] {
            assert_eq!(
                ExitClass::from_code(code),
                ExitClass::ApiStatus { http_status: http }
            );
        }
    }

    #[test]
    fn documented_codes() {
        assert_eq!(ExitClass::from_code(0), ExitClass::Zero);
        assert_eq!(ExitClass::from_code(41), ExitClass::Auth);
        assert_eq!(ExitClass::from_code(53), ExitClass::TurnLimit);
        assert_eq!(ExitClass::from_code(55), ExitClass::UntrustedWorkspace);
        assert_eq!(ExitClass::from_code(130), ExitClass::Cancelled);
        assert_eq!(ExitClass::from_code(7), ExitClass::Other { code: 7 });
    }
}
