#!/usr/bin/env bash
# Sets up Switchyard on a fresh machine and runs the main job end to end:
# build, install + seal the pinned Gemini CLI, run a task through the gateway against a scripted
# model on 127.0.0.1 (switchyard-dev: the scripted model is not in the product binary), then list
# the recorded runs and the model usage they took.
set -euo pipefail
cd "$(dirname "$0")/.."
export SWITCHYARD_HOME="${SWITCHYARD_HOME:-$PWD/.cache/switchyard-home}"
cargo build -p switchyard -p switchyard-dev
bin=target/debug/switchyard
"$bin" install gemini-cli
records="${SWITCHYARD_DEMO_RECORDS:-$PWD/.cache/demo-records}"
target/debug/switchyard-dev demo --records "$records"
"$bin" records --records "$records" list
"$bin" records --records "$records" usage
