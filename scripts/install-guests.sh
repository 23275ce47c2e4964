#!/usr/bin/env bash
# Installs the pinned guest CLIs that the tests drive, into .cache/guests/ (ignored by git).
# Idempotent: an install whose package.json already names the pinned version is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
GEMINI_VERSION="0.61.0"
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
