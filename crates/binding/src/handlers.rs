//! The handlers a tools file can name: a command (arguments on stdin, result on stdout) or a
//! URL (arguments POSTed as JSON, result read back). Both are bounded: a timeout per call,
//! and at most [`MAX_OUTPUT`] bytes of result read.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::tool::{HostTool, ToolError, ToolFuture, ToolOutput};

/// Most bytes of a tool's result (stdout or response body) read.
pub const MAX_OUTPUT: usize = 16 * 1024 * 1024;

/// How much of a failing command's stderr the model is shown.
const STDERR_TAIL: usize = 4 * 1024;

/// The name, description and schema every handler carries.
#[derive(Debug, Clone)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
    pub timeout: Duration,
}

/// `HostTool` for a handler with a `spec: ToolSpec` and an `async fn run(&self, Value)`.
macro_rules! host_tool_from_spec {
    ($handler:ty) => {
        impl HostTool for $handler {
            fn name(&self) -> &str {
                &self.spec.name
            }
            fn description(&self) -> &str {
                &self.spec.description
            }
            fn input_schema(&self) -> &Value {
                &self.spec.input_schema
            }
            fn call(&self, arguments: Value) -> ToolFuture<'_> {
                Box::pin(self.run(arguments))
            }
        }
    };
}

/// Reads a tool's result: a JSON object with `text` and/or `images` (`[{"mime_type",
/// "data"}]`) is that result; anything else is the whole output as text.
fn output_of(bytes: &[u8]) -> ToolOutput {
    let shaped = serde_json::from_slice::<serde_json::Map<String, Value>>(bytes)
        .ok()
        .filter(|object| object.contains_key("text") || object.contains_key("images"))
        .and_then(|object| serde_json::from_value::<ToolOutput>(Value::Object(object)).ok());
    shaped.unwrap_or_else(|| ToolOutput {
        text: String::from_utf8_lossy(bytes).into_owned(),
        images: Vec::new(),
    })
}

/// Reads at most `limit` bytes of `reader`.
async fn read_bounded(
    reader: impl tokio::io::AsyncRead + Unpin,
    limit: usize,
) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    reader
        .take(u64::try_from(limit).unwrap_or(u64::MAX))
        .read_to_end(&mut out)
        .await?;
    Ok(out)
}

/// A tool run as a command: `argv` started in `cwd`, the JSON arguments on its stdin.
#[derive(Debug, Clone)]
pub struct CommandTool {
    pub spec: ToolSpec,
    pub argv: Vec<String>,
    pub cwd: PathBuf,
}

impl CommandTool {
    async fn run(&self, arguments: Value) -> Result<ToolOutput, ToolError> {
        let failed = |what: &str, e: std::io::Error| ToolError::Failed(format!("{what}: {e}"));
        let (program, args) = self
            .argv
            .split_first()
            .ok_or_else(|| ToolError::Failed("the tool has an empty command".into()))?;
        let mut child = tokio::process::Command::new(program)
            .args(args)
            .current_dir(&self.cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| failed(&format!("cannot start {program}"), e))?;
        let input = serde_json::to_vec(&arguments).unwrap_or_default();
        let (Some(mut stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(ToolError::Failed("the tool's pipes are not open".into()));
        };
        let write = async move {
            // A tool that does not read its stdin is not an error.
            let _ = stdin.write_all(&input).await;
            drop(stdin);
        };
        // One byte more than the bound tells an over-long result from one that fits. The pipe
        // closes once that much is read, so a tool still writing gets EPIPE (or the timeout).
        let read_out = read_bounded(stdout, MAX_OUTPUT + 1);
        let read_err = read_bounded(stderr, 1024 * 1024);
        let finished = async {
            let ((), out, err) = tokio::join!(write, read_out, read_err);
            let status = child.wait().await;
            (out, err, status)
        };
        // On a timeout `child` is dropped with the future: kill_on_drop stops it.
        let (out, err, status) = tokio::time::timeout(self.spec.timeout, finished)
            .await
            .map_err(|_| ToolError::TimedOut(self.spec.timeout))?;
        let status = status.map_err(|e| failed("waiting for the tool", e))?;
        let out = out.map_err(|e| failed("reading the tool's output", e))?;
        if out.len() > MAX_OUTPUT {
            return Err(ToolError::Failed(format!(
                "the tool's result is larger than {} MiB",
                MAX_OUTPUT / (1024 * 1024)
            )));
        }
        if !status.success() {
            let err = err.unwrap_or_default();
            let tail = &err[err.len().saturating_sub(STDERR_TAIL)..];
            let code = status
                .code()
                .map_or_else(|| "a signal".to_owned(), |c| format!("exit code {c}"));
            return Err(ToolError::Failed(format!(
                "the tool failed ({code}): {}",
                String::from_utf8_lossy(tail).trim()
            )));
        }
        Ok(output_of(&out))
    }
}

host_tool_from_spec!(CommandTool);

/// A tool behind a URL: the JSON arguments are POSTed, the JSON result read back.
#[derive(Debug, Clone)]
pub struct UrlTool {
    pub spec: ToolSpec,
    pub url: reqwest::Url,
    pub client: reqwest::Client,
}

impl UrlTool {
    async fn run(&self, arguments: Value) -> Result<ToolOutput, ToolError> {
        let sent = self.client.post(self.url.clone()).json(&arguments).send();
        let response = tokio::time::timeout(self.spec.timeout, sent)
            .await
            .map_err(|_| ToolError::TimedOut(self.spec.timeout))?
            .map_err(|e| ToolError::Failed(format!("cannot reach the tool: {e}")))?;
        let status = response.status();
        let mut body = Vec::new();
        let mut response = response;
        let read = async {
            while let Some(chunk) = response.chunk().await? {
                let room = MAX_OUTPUT.saturating_sub(body.len());
                body.extend_from_slice(&chunk[..chunk.len().min(room)]);
                if body.len() >= MAX_OUTPUT {
                    break;
                }
            }
            Ok::<_, reqwest::Error>(())
        };
        tokio::time::timeout(self.spec.timeout, read)
            .await
            .map_err(|_| ToolError::TimedOut(self.spec.timeout))?
            .map_err(|e| ToolError::Failed(format!("reading the tool's answer: {e}")))?;
        if !status.is_success() {
            let tail = &body[body.len().saturating_sub(STDERR_TAIL)..];
            return Err(ToolError::Failed(format!(
                "the tool answered HTTP {status}: {}",
                String::from_utf8_lossy(tail).trim()
            )));
        }
        Ok(output_of(&body))
    }
}

host_tool_from_spec!(UrlTool);

#[cfg(test)]
mod tests {
    use super::*;

    fn python(code: &str) -> CommandTool {
        CommandTool {
            spec: ToolSpec {
                name: "t".into(),
                description: "d".into(),
                input_schema: serde_json::json!({"type": "object"}),
                timeout: Duration::from_secs(30),
            },
            argv: vec!["python3".into(), "-c".into(), code.into()],
            cwd: std::env::temp_dir(),
        }
    }

    #[tokio::test]
    async fn an_over_long_result_is_a_clear_error_not_a_timeout() {
        let flood = python("import sys\nwhile True: sys.stdout.write('x' * 65536)");
        let err = flood.run(serde_json::json!({})).await.unwrap_err();
        assert!(
            matches!(&err, ToolError::Failed(m) if m.contains("larger than 16 MiB")),
            "{err:?}"
        );
        let fits = python("import sys\nsys.stdout.write('y' * (16 * 1024 * 1024))");
        let out = fits.run(serde_json::json!({})).await.unwrap();
        assert_eq!(out.text.len(), MAX_OUTPUT);
    }

    #[test]
    fn results_in_the_tool_shape_are_read_and_anything_else_is_text() {
        let shaped =
            output_of(br#"{"text": "hi", "images": [{"mime_type": "image/png", "data": "AA=="}]}"#);
        assert_eq!((shaped.text.as_str(), shaped.images.len()), ("hi", 1));
        for other in [
            &br#"{"foo": 1}"#[..],
            b"[1, 2]",
            b"plain",
            br#"{"text": 5}"#,
        ] {
            assert_eq!(
                output_of(other).text,
                String::from_utf8_lossy(other),
                "{other:?}"
            );
        }
    }
}
