//! Captured guest requests that tests and benchmarks replay (see `data/README.md`).

/// The first request Gemini CLI 0.61.0 sent in a captured run (~47 KB: the system instruction
/// and 16 tool declarations).
pub const GEMINI_CLI_FIRST_REQUEST: &[u8] =
    include_bytes!("../data/gemini-cli-0.61.0-first-request.json");

/// The first Chat Completions request OpenCode 1.18.33 sent in a captured run (~30 KB: the
/// system prompt and 11 tool declarations), as `switchyard-dev capture --agent opencode` recorded
/// it (`fixtures/opencode/1.18.33/text/requests.jsonl`).
pub const OPENCODE_FIRST_REQUEST: &[u8] =
    include_bytes!("../data/opencode-1.18.33-first-request.json");

/// The first Messages request Claude Code 2.1.332 sent in a run through the gateway (~90 KB:
/// the system prompt, the system turn and 21 tool declarations inline, under the launch's
/// settings), as the run's records kept it (`guest_request`), the workspace and run paths
/// replaced by `/workspace` and `/run`.
pub const CLAUDE_CODE_FIRST_REQUEST: &[u8] =
    include_bytes!("../data/claude-code-2.1.332-first-request.json");

/// The first Responses request a stock Codex 0.171.0 sent through the gateway (~23 KB: two
/// developer messages, the environment context and nine tools, `apply_patch` freeform and one
/// namespace), as the gateway's records kept it, local paths replaced (see `data/README.md`).
pub const CODEX_FIRST_REQUEST: &[u8] = include_bytes!("../data/codex-0.171.0-first-request.json");

/// An 8-bit RGB PNG of `pixels` (3 bytes each, row by row).
pub fn rgb_png(width: u32, height: u32, pixels: &[u8]) -> Result<Vec<u8>, png::EncodingError> {
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, width, height);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    encoder.write_header()?.write_image_data(pixels)?;
    Ok(out)
}

/// A `width` x `height` 8-bit grayscale PNG of zeros, written row by row (never whole in
/// memory): a few hundred KiB that decode to `width * height` bytes, the shape of a hostile
/// image in a guest's request.
pub fn zero_png(width: u32, height: u32) -> Result<Vec<u8>, png::EncodingError> {
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, width, height);
    encoder.set_color(png::ColorType::Grayscale);
    encoder.set_depth(png::BitDepth::Eight);
    encoder.set_compression(png::Compression::Fast);
    let mut writer = encoder.write_header()?;
    let mut stream = writer.stream_writer()?;
    let row = vec![0u8; width as usize];
    for _ in 0..height {
        std::io::Write::write_all(&mut stream, &row)?;
    }
    stream.finish()?;
    drop(writer);
    Ok(out)
}
