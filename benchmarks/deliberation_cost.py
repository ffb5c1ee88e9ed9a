"""Prompt tokens per behaviour and the critical path of one deliberation, measured in process.

An in-process LM (`teammed.backends.ScriptedLM` with a fixed latency) answers every call
with a schema-valid, varied answer of realistic length, counts each call's prompt tokens
with tiktoken ``cl100k_base`` (system + user text as sent), tags the call with its
behaviour (the schema title the adapter sends) and records when it started and ended.

From the timestamps: the longest chain of calls each starting after the previous one
ended (the calls that ran one after another), and wall time per question over
``chain x latency``. Not a test; run it by hand::

    python benchmarks/deliberation_cost.py --presets base,all --latency 0.05

It only uses public API that exists before and after the issue-11 changes, so the same
script measures any checkout: ``PYTHONPATH=/tmp/base/src python benchmarks/deliberation_cost.py``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import statistics
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import dspy  # noqa: E402
import tiktoken  # noqa: E402
from litellm.litellm_core_utils import default_encoding  # noqa: E402
from run import longest_chain  # noqa: E402

from teammed.adapter import SchemaAdapter  # noqa: E402
from teammed.backends import ScriptedCall, ScriptedLM  # noqa: E402
from teammed.config import preset  # noqa: E402
from teammed.programs.teamwork import TeamworkProgram  # noqa: E402

_ENC: tiktoken.Encoding = default_encoding.encoding  # cl100k_base from litellm's bundled copy (no download)
_WORDS = ("patient presents with findings consistent with the diagnosis because the history and "
          "laboratory results support it while the alternative explanations fail to account for the "
          "timing severity and distribution of symptoms so the most likely mechanism remains").split()
# Output lengths in words: what the field's description asks for ("Under 60 words" -> 45,
# sentences at 18 words each), else a typical length for the field name.
_LENGTH = {"justification": 36, "rationale": 30, "concern": 30, "restatement": 18, "correction": 18,
           "reason": 20, "analysis": 30, "flaw": 20, "expertise": 5, "role": 2}
_SENTENCES = {"one sentence": 1, "one or two sentences": 2, "at most two sentences": 2}


def _words(name: str, schema: dict[str, Any]) -> int:
    desc = str(schema.get("description", "")).lower()
    under = re.search(r"under (\d+) words", desc)
    if under:
        return int(int(under.group(1)) * 0.75)
    for phrase, n in _SENTENCES.items():
        if phrase in desc:
            return 18 * n
    return _LENGTH.get(name, 20)


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(words)) + "."


def _value(name: str, schema: dict[str, Any], rng: random.Random) -> Any:
    if "enum" in schema:
        return rng.choice(schema["enum"])
    kind = schema.get("type")
    if kind == "object":
        return {k: _value(k, v, rng) for k, v in schema.get("properties", {}).items()}
    if kind == "array":
        item = schema.get("items", {})
        if "enum" in item:
            letters = list(item["enum"])
            rng.shuffle(letters)
            return letters
        low, high = schema.get("minItems", 1), schema.get("maxItems", 5)
        n = rng.randint((low + high) // 2, max(low, high))  # lists fill the upper half of their bounds
        if name == "facts":
            return [_text(rng, 12) for _ in range(n)]
        return [_value(name, item, rng) for _ in range(n)]
    if kind == "string":
        return _text(rng, _words(name, schema))
    if kind == "integer":
        return rng.choice([2, 3, 4]) if name == "n_agents" else int(schema.get("minimum", 1))
    if kind == "number":
        return round(rng.uniform(0.3, 1.0), 2)
    if kind == "boolean":
        return rng.random() < 0.7
    return None


class BenchLM(ScriptedLM):
    """A fixed-latency scripted LM that counts tokens and timestamps every call."""

    def __init__(self, *, latency_s: float, seed: int = 0):
        super().__init__(self._answer, delay_s=latency_s)
        self.seed = seed
        self.log: list[dict[str, Any]] = []
        self._log_lock = threading.Lock()

    def _answer(self, call: ScriptedCall) -> dict[str, Any]:
        key = json.dumps([self.seed, call.signature, call.messages], sort_keys=True, default=str)
        rng = random.Random(hashlib.sha256(key.encode()).hexdigest())
        return {k: _value(k, v, rng) for k, v in call.schema.get("properties", {}).items()}

    def complete(self, messages, **kwargs):  # type: ignore[no-untyped-def]
        started = time.perf_counter()
        response, info = super().complete(messages, **kwargs)
        ended = time.perf_counter()
        fmt = kwargs.get("response_format") or {}
        schema = fmt.get("schema") or fmt.get("json_schema", {}).get("schema") or {}
        tokens = sum(len(_ENC.encode(_content(m))) for m in messages)
        with self._log_lock:
            self.log.append({"behaviour": schema.get("title", "?"), "prompt_tokens": tokens,
                             "start": started, "end": ended})
        return response, info


def _content(message: dict[str, Any]) -> str:
    content = message.get("content", "")
    if isinstance(content, list):
        return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content)


def load_questions(path: Path, n: int) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return rows[:n]


def measure(name: str, questions: list[dict[str, Any]], *, latency_s: float, n_agents: int, n_turns: int) -> dict:
    config = preset(name, n_agents=n_agents, n_turns=n_turns)
    per_behaviour: dict[str, int] = defaultdict(int)
    totals, calls, chains, ratios = [], [], [], []
    for index, q in enumerate(questions):
        lm = BenchLM(latency_s=latency_s, seed=index)
        program = TeamworkProgram(config)
        started = time.perf_counter()
        with dspy.context(lm=lm, adapter=SchemaAdapter()):
            try:
                program(question=q["question"], options=q["options"])
            except Exception as exc:  # noqa: BLE001 - a benchmark reports, it does not stop
                print(f"  {name} q{index}: {type(exc).__name__}: {exc}", file=sys.stderr)
        wall = time.perf_counter() - started
        for entry in lm.log:
            per_behaviour[entry["behaviour"]] += entry["prompt_tokens"]
        totals.append(sum(e["prompt_tokens"] for e in lm.log))
        calls.append(len(lm.log))
        chain = longest_chain(lm.log, slack=1e-6)
        chains.append(chain)
        ratios.append(wall / (chain * latency_s) if chain and latency_s else float("nan"))
    total = sum(per_behaviour.values())
    return {
        "preset": name, "questions": len(questions),
        "prompt_tokens_per_question": statistics.mean(totals),
        "calls_per_question": statistics.mean(calls),
        "longest_chain": max(chains), "mean_chain": statistics.mean(chains),
        "wall_over_chain_x_latency": max(ratios),
        "by_behaviour": {k: (v / len(questions), v / total) for k, v in
                         sorted(per_behaviour.items(), key=lambda kv: -kv[1])},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[1] / "data" / "demo.jsonl")
    parser.add_argument("--n", type=int, default=20, help="questions (default 20)")
    parser.add_argument("--presets", default="base,all")
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per call (default 0.05)")
    parser.add_argument("--agents", type=int, default=3)
    parser.add_argument("--turns", type=int, default=2)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    questions = load_questions(args.data, args.n)
    results = [measure(p, questions, latency_s=args.latency, n_agents=args.agents, n_turns=args.turns)
               for p in args.presets.split(",")]
    if args.json:
        print(json.dumps(results, indent=1))
        return 0
    for r in results:
        print(f"== {r['preset']} N={args.agents} T={args.turns}, {r['questions']} questions from {args.data.name}, "
              f"latency {args.latency}s")
        print(f"prompt tokens / question   {r['prompt_tokens_per_question']:8.0f}")
        print(f"calls / question           {r['calls_per_question']:8.1f}")
        print(f"longest chain (max, mean)  {r['longest_chain']:8d} {r['mean_chain']:6.1f}")
        print(f"wall / (chain x latency)   {r['wall_over_chain_x_latency']:8.2f}  (worst question)")
        for behaviour, (tokens, share) in r["by_behaviour"].items():
            print(f"  {behaviour:22s} {tokens:7.0f} {share:6.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
