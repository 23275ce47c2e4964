#!/usr/bin/env bash
# Installs the pinned guest CLIs that the tests drive, into .cache/guests/ (ignored by git).
# Idempotent: an install whose package.json already names the pinned version is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
GEMINI_VERSION="0.61.0"
OPENCODE_VERSION="1.18.33"
prefix=".cache/guests/gemini-cli-${GEMINI_VERSION}"
mkdir -p .cache/guests
# Tests may call this concurrently (testkit installs on demand): one installer at a time.
exec 9>.cache/guests/.install.lock
flock 9
pkg="$prefix/node_modules/@google/gemini-cli/package.json"
if [ -f "$pkg" ] && grep -q "\"version\": \"${GEMINI_VERSION}\"" "$pkg"; then
  echo "gemini-cli ${GEMINI_VERSION} already installed in $prefix"
else
  mkdir -p "$prefix"
  npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error "@google/gemini-cli@${GEMINI_VERSION}"
  echo "installed gemini-cli ${GEMINI_VERSION} in $prefix"
fi
# OpenCode: its npm postinstall links the platform binary to bin/opencode.exe.
oc_prefix=".cache/guests/opencode-${OPENCODE_VERSION}"
oc_pkg="$oc_prefix/node_modules/opencode-ai/package.json"
if [ -f "$oc_pkg" ] && grep -q "\"version\": \"${OPENCODE_VERSION}\"" "$oc_pkg" && [ -x "$oc_prefix/node_modules/opencode-ai/bin/opencode.exe" ]; then
  echo "opencode ${OPENCODE_VERSION} already installed in $oc_prefix"
else
  mkdir -p "$oc_prefix"
  npm install --prefix "$oc_prefix" --no-audit --no-fund --loglevel=error "opencode-ai@${OPENCODE_VERSION}"
  echo "installed opencode ${OPENCODE_VERSION} in $oc_prefix"
fi
