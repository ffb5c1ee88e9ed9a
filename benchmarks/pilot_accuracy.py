"""Does the dry run's price hold (issue 45)? Its range, and a pilot's expected figure, against what a server bills.

On MedQA's hard set as MedAgentsBench published it (question texts, options and answers read from
``--published``'s files, the eval part of teammed's split), against the fake server of
`benchmarks/fake_server.py` (answers drawn at random under each request's schema, so routes,
confidences and yes/no choices vary; tokens counted with tiktoken), for each system:

1. ``plan(spec)``: the range of billable tokens (cheapest to dearest path) and the headline figure;
2. ``plan(spec, pilot=K)``: the expected figure and its interval from K real questions;
3. ``run(spec)``: the billable tokens the server counted (the pilot's answers are read from the
   response cache, billable as ever).

    python benchmarks/pilot_accuracy.py --published ../shared/medagentsbench/output [--n 50] [--pilot 3]
        [--systems base,all,zero_shot,mdagents,kamac,consultation,adaptive] [--out FILE.json] [--model local]

``--model local`` runs the same against the embedded model's server instead (real completions).

Prints (and writes, with --out) one JSON document: per system, billed tokens, the range, whether the
billed lies in it, the pilot's expected and interval, the expected's ratio to the billed.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from run import Server, emit  # noqa: E402

from teammed import experiments as ex  # noqa: E402
from teammed.data.published import published_files  # noqa: E402

SYSTEMS = ("base", "all", "zero_shot", "mdagents", "kamac", "consultation", "adaptive")


def write_medqa(published: Path, folder: Path) -> Path:
    """A MedAgentsBench data folder (``medqa/test_hard.jsonl``) from the questions of a published file."""
    source = published_files(published, dataset="medqa")[0]
    rows = json.loads(source.read_text())
    (folder / "medqa").mkdir(parents=True, exist_ok=True)
    with (folder / "medqa" / "test_hard.jsonl").open("w") as sink:
        for row in rows:
            options = row["options"] if isinstance(row["options"], dict) else ast.literal_eval(row["options"])
            sink.write(json.dumps({"realidx": row["realidx"], "question": row["question"], "options": options,
                                   "answer_idx": row["answer_idx"]}) + "\n")
    return folder


def measure(system: str, data: Path, *, n: int, k: int, api_base: str | None, work: Path,
            model: str = "openai/gpt-4o-mini") -> dict[str, Any]:
    team: dict[str, Any] = {"preset": system, "n_agents": 3} if system in ("base", "all") else {"system": system}
    if system == "adaptive":
        team.update(preset="all", n_agents=3)
    spec = ex.RunSpec(data={"dataset": "medqa", "data_dir": str(data), "split": "test_hard"}, team=team, n=n,
                      backend={"model": model, "api_base": api_base, "cache_dir": str(work / "cache"),
                               "concurrency": 1 if model == "local" else 4}, out=str(work / "runs" / system))
    started = time.perf_counter()
    dry = ex.plan(spec)
    dry_s = time.perf_counter() - started
    piloted = ex.plan(spec, pilot=k)
    result = ex.run(spec)
    rows = result.rows()
    billed = sum(r.prompt_tokens + r.completion_tokens for r in rows)
    [part] = dry.parts
    [pilot_part] = piloted.parts
    low, high = (part.low or (0, 0))[1], (part.high or (0, 0))[1]
    headline = part.prompt_tokens + part.completion_tokens
    expected = pilot_part.prompt_tokens + pilot_part.completion_tokens
    interval = pilot_part.interval
    return {
        "system": system, "questions": len(rows), "failed": sum(r.failed for r in rows),
        "billed_calls": sum(r.calls for r in rows), "billed_tokens": billed,
        "range": [low, high], "in_range": low <= billed <= high,
        "dry_run_headline": headline, "headline_ratio": round(headline / billed, 3),
        "pilot_expected": expected, "pilot_ratio": round(expected / billed, 3),
        "pilot_interval": list(interval) if interval else None,
        "in_pilot_interval": None if interval is None else interval[0] <= billed <= interval[1],
        "paths": part.paths, "pilot_questions": piloted.pilot.questions if piloted.pilot else 0,
        "dry_run_s": round(dry_s, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--published", type=Path, required=True)
    parser.add_argument("--n", type=int, default=50)
    parser.add_argument("--pilot", type=int, default=3)
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--out", type=Path)
    parser.add_argument("--model", default="fake", help="fake (benchmarks/fake_server.py, default) or local (the "
                        "embedded SmolLM2 model: real completions, one request at a time, 10-30 s a call)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        data = write_medqa(args.published, work / "data")
        if args.model == "local":
            found = [measure(s, data, n=args.n, k=args.pilot, api_base=None, work=work, model="local")
                     for s in args.systems.split(",")]
        else:
            with Server(latency_s=0.0, log=work / "requests.jsonl") as server:
                found = [measure(s, data, n=args.n, k=args.pilot, api_base=server.api_base, work=work)
                         for s in args.systems.split(",")]
    server_name = "the embedded model (llama.cpp)" if args.model == "local" else "benchmarks/fake_server.py"
    emit({"n": args.n, "pilot": args.pilot, "server": server_name, "systems": found}, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
