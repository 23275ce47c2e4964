#!/usr/bin/env python3
"""Writes seed corpora for the fuzz targets into DIR/<target>/: the guest requests, the
stream-json and ACP stdout of the captured Gemini CLI fixtures, the Chat requests and event
streams of the OpenCode fixtures, Claude Code's first request and the stdout lines of its
fixtures, Codex's first request and the app-server lines of its fixtures, and a few small PNGs."""
import json
import pathlib
import struct
import sys
import zlib

root = pathlib.Path(__file__).resolve().parent.parent
out = pathlib.Path(sys.argv[1])


def put(target, name, data):
    path = out / target
    path.mkdir(parents=True, exist_ok=True)
    (path / name).write_bytes(data)


def bodies(requests):
    for line in requests.read_text().splitlines()[:3]:
        body = json.loads(line).get("body")
        if isinstance(body, str):
            body = json.loads(body)
        yield json.dumps(body).encode()


for fixture in sorted((root / "fixtures" / "gemini-cli").glob("*/*")):
    requests = fixture / "requests.jsonl"
    if requests.is_file():
        for i, body in enumerate(bodies(requests)):
            put("generate_content_request", f"{fixture.name}-{i}.json", body)
    stdout = fixture / "stdout.jsonl"
    if stdout.is_file():
        put("stream_json_lines", f"{fixture.name}.jsonl", stdout.read_bytes())

for fixture in sorted((root / "fixtures" / "gemini-cli").glob("*/acp/*")):
    stdout = fixture / "stdout.jsonl"
    if stdout.is_file():
        put("acp_lines", f"{fixture.name}.jsonl", stdout.read_bytes())

for fixture in sorted((root / "fixtures" / "opencode").glob("*/*")):
    requests = fixture / "requests.jsonl"
    if requests.is_file():
        for i, body in enumerate(bodies(requests)):
            put("chat_completions_request", f"{fixture.name}-{i}.json", body)
    events = fixture / "events.jsonl"
    if events.is_file():
        sse = "".join(f"data: {line}\n\n" for line in events.read_text().splitlines())
        put("opencode_events", f"{fixture.name}.sse", sse.encode())

put(
    "messages_request",
    "claude-code-first-request.json",
    (root / "crates" / "testkit" / "data" / "claude-code-2.1.332-first-request.json").read_bytes(),
)
put(
    "responses_request",
    "codex-first-request.json",
    (root / "crates" / "testkit" / "data" / "codex-0.171.0-first-request.json").read_bytes(),
)
for fixture in sorted((root / "fixtures" / "claude-code").glob("*/*")):
    notes = fixture / "notes.jsonl"
    if notes.is_file():
        lines = [json.loads(n)["line"] for n in notes.read_text().splitlines() if '"line"' in n[:10]]
        put("claude_lines", f"{fixture.name}.jsonl", "\n".join(lines).encode())

for fixture in sorted((root / "fixtures" / "codex").glob("*/*")):
    notes = fixture / "notes.jsonl"
    if notes.is_file():
        lines = [json.loads(n)["line"] for n in notes.read_text().splitlines() if '"line"' in n[:10]]
        put("codex_lines", f"{fixture.name}.jsonl", "\n".join(lines).encode())


def png(width, height, color_type, depth, row):
    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    raw = b"".join(b"\x00" + row for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, depth, color_type, 0, 0, 0)
    extra = chunk(b"PLTE", bytes(range(12))) if color_type == 3 else b""
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + extra
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


put("png_image", "rgb.png", png(8, 8, 2, 8, bytes(range(24))))
put("png_image", "rgba.png", png(4, 4, 6, 8, bytes(range(16))))
put("png_image", "gray16.png", png(2, 2, 0, 16, b"\x01\x02\x03\x04"))
put("png_image", "palette.png", png(4, 2, 3, 8, b"\x00\x01\x02\x03"))
