//! `--prompts-stdin`: more prompts, one JSON line each, read from stdin as they arrive.

/// Longest prompt line `--prompts-stdin` reads.
const MAX_PROMPT_LINE: usize = 1024 * 1024;

/// Prompts from stdin, one JSON line each, as they arrive. A line that is not a prompt, or is
/// longer than [`MAX_PROMPT_LINE`], ends the input with a message (the prompts before it stand).
pub(crate) fn stdin_prompts() -> tokio::sync::mpsc::Receiver<String> {
    use std::io::{BufRead, Read};
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    std::thread::spawn(move || {
        let stdin = std::io::stdin();
        let mut input = stdin.lock();
        loop {
            let mut line = Vec::new();
            let limit = u64::try_from(MAX_PROMPT_LINE).unwrap_or(u64::MAX) + 1;
            match (&mut input).take(limit).read_until(b'\n', &mut line) {
                Ok(0) => return,
                Ok(_) if line.len() > MAX_PROMPT_LINE => {
                    eprintln!(
                        "switchyard: a stdin prompt line is longer than {MAX_PROMPT_LINE} bytes; no more prompts are read"
                    );
                    return;
                }
                Ok(_) => {}
                Err(e) => {
                    eprintln!("switchyard: reading prompts from stdin: {e}");
                    return;
                }
            }
            let text = String::from_utf8_lossy(&line);
            if text.trim().is_empty() {
                continue;
            }
            let Some(prompt) = parse_prompt_line(&text) else {
                eprintln!(
                    "switchyard: a stdin line is not a prompt (a JSON string or {{\"prompt\": \"…\"}}); no more prompts are read"
                );
                return;
            };
            if tx.blocking_send(prompt).is_err() {
                return;
            }
        }
    });
    rx
}

/// One `--prompts-stdin` line: a JSON string, or an object with a non-empty `prompt` string.
pub(crate) fn parse_prompt_line(line: &str) -> Option<String> {
    let prompt = match serde_json::from_str::<serde_json::Value>(line).ok()? {
        serde_json::Value::String(s) => s,
        serde_json::Value::Object(o) => o.get("prompt")?.as_str()?.to_owned(),
        _ => return None,
    };
    (!prompt.trim().is_empty()).then_some(prompt)
}

#[cfg(test)]
#[path = "prompts_tests.rs"]
mod tests;
