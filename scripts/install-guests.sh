#!/usr/bin/env bash
# Installs the pinned guest CLIs that the tests drive, into .cache/guests/ (ignored by git).
# Idempotent: an install whose package.json already names the pinned version is kept.
# Each install is made in a staging folder and renamed into place once npm has finished, so a
# prefix that exists is complete: a test that finds it never seals a half-built install (npm
# extracts the package before native dependencies such as node-pty have finished building).
set -euo pipefail
cd "$(dirname "$0")/.."
GEMINI_VERSION="0.61.0"
OPENCODE_VERSION="1.18.33"
CLAUDE_CODE_VERSION="2.1.332"
mkdir -p .cache/guests
# Tests may call this concurrently (testkit installs on demand): one installer at a time.
exec 9>.cache/guests/.install.lock
flock 9

# install PREFIX SPEC: npm install SPEC into a staging folder, then rename it to PREFIX.
install() {
  local prefix="$1" spec="$2" staging="$1.staging"
  rm -rf "$staging"
  mkdir -p "$staging"
  npm install --prefix "$staging" --no-audit --no-fund --loglevel=error "$spec"
  rm -rf "$prefix"
  mv "$staging" "$prefix"
  echo "installed $spec in $prefix"
}

prefix=".cache/guests/gemini-cli-${GEMINI_VERSION}"
pkg="$prefix/node_modules/@google/gemini-cli/package.json"
if [ -f "$pkg" ] && grep -q "\"version\": \"${GEMINI_VERSION}\"" "$pkg"; then
  echo "gemini-cli ${GEMINI_VERSION} already installed in $prefix"
else
  install "$prefix" "@google/gemini-cli@${GEMINI_VERSION}"
fi
# OpenCode: its npm postinstall links the platform binary to bin/opencode.exe.
oc_prefix=".cache/guests/opencode-${OPENCODE_VERSION}"
oc_pkg="$oc_prefix/node_modules/opencode-ai/package.json"
if [ -f "$oc_pkg" ] && grep -q "\"version\": \"${OPENCODE_VERSION}\"" "$oc_pkg" && [ -x "$oc_prefix/node_modules/opencode-ai/bin/opencode.exe" ]; then
  echo "opencode ${OPENCODE_VERSION} already installed in $oc_prefix"
else
  install "$oc_prefix" "opencode-ai@${OPENCODE_VERSION}"
fi
# Claude Code: its npm postinstall hard-links the platform's native binary to bin/claude.exe.
cc_prefix=".cache/guests/claude-code-${CLAUDE_CODE_VERSION}"
cc_pkg="$cc_prefix/node_modules/@anthropic-ai/claude-code/package.json"
if [ -f "$cc_pkg" ] && grep -q "\"version\": \"${CLAUDE_CODE_VERSION}\"" "$cc_pkg" && [ -x "$cc_prefix/node_modules/@anthropic-ai/claude-code/bin/claude.exe" ]; then
  echo "claude-code ${CLAUDE_CODE_VERSION} already installed in $cc_prefix"
else
  install "$cc_prefix" "@anthropic-ai/claude-code@${CLAUDE_CODE_VERSION}"
fi
# Codex: the npm package is a Node launcher; the native binary comes with the platform's
# optional dependency (@openai/codex-linux-x64), which the seal covers like any other file.
CODEX_VERSION="0.171.0"
cx_prefix=".cache/guests/codex-${CODEX_VERSION}"
cx_pkg="$cx_prefix/node_modules/@openai/codex/package.json"
cx_bin="$cx_prefix/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"
if [ -f "$cx_pkg" ] && grep -q "\"version\": \"${CODEX_VERSION}\"" "$cx_pkg" && [ -x "$cx_bin" ]; then
  echo "codex ${CODEX_VERSION} already installed in $cx_prefix"
else
  install "$cx_prefix" "@openai/codex@${CODEX_VERSION}"
fi
