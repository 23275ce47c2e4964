#!/usr/bin/env bash
# Runs every fuzz target (fuzz/, libFuzzer through cargo-fuzz, stable Rust, no sanitizer) for
# SECONDS each (default 20), seeded from the captured fixtures. A crash fails the script and
# leaves its input in fuzz/artifacts/<target>/. Installs cargo-fuzz into .cache/ when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-20}"
if ! cargo fuzz --version >/dev/null 2>&1; then
  export PATH="$PWD/.cache/cargo-fuzz/bin:$PATH"
  cargo fuzz --version >/dev/null 2>&1 ||
    cargo install --locked --quiet --root .cache/cargo-fuzz cargo-fuzz
fi
corpus=.cache/fuzz-corpus
python3 scripts/fuzz_seeds.py "$corpus"
targets=(generate_content_request upstream_stream stream_json_lines png_image chat_completions_request opencode_events acp_lines messages_request claude_lines responses_request codex_lines)
cargo fuzz build -s none -O
for target in "${targets[@]}"; do
  mkdir -p "$corpus/$target"
  seeds=()
  [ -d "fuzz/seeds/$target" ] && seeds=("fuzz/seeds/$target")
  echo "== fuzz $target for ${secs}s"
  log="$corpus/$target.log"
  status=0
  cargo fuzz run -s none -O "$target" "$corpus/$target" "${seeds[@]}" -- \
    -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 >"$log" 2>&1 ||
    status=$?
  grep -E "^stat::number_of_executed_units|^Done|panicked|ERROR|SUMMARY|deadly signal" "$log" || true
  if [ "$status" -ne 0 ]; then
    tail -40 "$log"
    echo "== fuzz $target found a crash (see fuzz/artifacts/$target)"
    exit 1
  fi
done
