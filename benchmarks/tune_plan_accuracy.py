"""Does ``tune --dry-run`` say what the real tune does (issue 45, item 4)? Calls, tokens and the proof, planned
and spent, under a ``tokens=`` budget.

On MedQA's hard set as MedAgentsBench published it (``--published``'s files; teammed's tune/eval split of
its 100 questions), against `benchmarks/fake_server.py` (answers drawn at random under each request's schema,
tokens counted with tiktoken), for each budget: ``plan(spec)`` and ``plan(spec, pilot=K)`` (the dry run
without and with a pilot: calls, tokens, and whether the proof runs), then ``tune(spec)`` (what the server
billed, and whether the proof ran). A budget the dry run refuses is reported as refused, and the real tune is
run anyway to show what it does.

    python benchmarks/tune_plan_accuracy.py --published ../shared/medagentsbench/output \
        [--budgets tokens=1500000,tokens=3000000] [--n-eval 20] [--optimizer bootstrap] [--batch-size 5] [--pilot 3]
        [--answer-tokens N] [--server-seed S] [--out FILE.json]

``--answer-tokens N`` makes the server pad each answer to about N tokens: a server as verbose as the model the
dry run names (gpt-4o-mini's published mean is 451), the best case for a dry run without a pilot.
``--server-seed S`` draws the server's answers anew: the real tune's own spread.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from pilot_accuracy import write_medqa  # noqa: E402
from run import Server, emit  # noqa: E402

from teammed import experiments as ex  # noqa: E402
from teammed.errors import TeammedError  # noqa: E402


def measure(budget: str, data: Path, *, n_eval: int, api_base: str, work: Path, optimizer: str,
            batch_size: int, pilot: int) -> dict[str, Any]:
    name = budget.replace("=", "")
    spec = ex.TuneSpec(data={"dataset": "medqa", "data_dir": str(data), "split": "test_hard"}, budget=budget,
                       n_eval=n_eval, out=str(work / name), optimizer=optimizer, batch_size=batch_size,
                       backend={"model": "openai/gpt-4o-mini", "api_base": api_base, "cache": False,
                                "concurrency": 4, "max_tokens": 512})
    found: dict[str, Any] = {"budget": budget}
    for label, k in (("dry_run", None), ("pilot", pilot)):
        started = time.perf_counter()
        try:
            dry = ex.plan(spec, pilot=k)
        except TeammedError as exc:
            found[label] = {"refused": str(exc)}
        else:
            # the proof runs when most of the dry run's draws ran it
            drew = re.search(r"held-out proof run in (\d+) of (\d+) draws", dry.parts[0].what)
            found[label] = {"calls": dry.calls, "tokens": dry.prompt_tokens + dry.completion_tokens,
                            "proof": drew is not None and 2 * int(drew[1]) > int(drew[2]), "text": dry.text()}
        found[label]["seconds"] = round(time.perf_counter() - started, 1)
    started = time.perf_counter()
    try:
        result = ex.tune(spec)
    except TeammedError as exc:
        found.update(tune="refused", tune_refusal=str(exc))
        return found
    spent = result.report.get("spent", {})
    found.update(tune=result.status, stage=result.stage, spent_calls=spent.get("calls"),
                 spent_tokens=spent.get("tokens"), proof_ran=result.report.get("held_out") is not None,
                 plans=result.report.get("plans"), tune_s=round(time.perf_counter() - started, 1))
    for label in ("dry_run", "pilot"):
        planned = found[label]
        if "calls" in planned and spent.get("calls"):
            planned.update(calls_ratio=round(planned["calls"] / spent["calls"], 3),
                           tokens_ratio=round(planned["tokens"] / spent["tokens"], 3),
                           proof_agrees=planned["proof"] == found["proof_ran"])
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--published", type=Path, required=True)
    parser.add_argument("--budgets", default="tokens=1500000,tokens=3000000")
    parser.add_argument("--n-eval", type=int, default=20)
    parser.add_argument("--optimizer", default="bootstrap")
    parser.add_argument("--batch-size", type=int, default=5)
    parser.add_argument("--pilot", type=int, default=3)
    parser.add_argument("--answer-tokens", type=int)
    parser.add_argument("--server-seed", type=int, default=0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        data = write_medqa(args.published, work / "data")
        with Server(latency_s=0.0, log=work / "requests.jsonl",
                    extra=["--seed", str(args.server_seed),
                           *(["--answer-tokens", str(args.answer_tokens)] if args.answer_tokens else [])]) as server:
            found = [measure(b, data, n_eval=args.n_eval, api_base=server.api_base, work=work, optimizer=args.optimizer,
                             batch_size=args.batch_size, pilot=args.pilot) for b in args.budgets.split(",")]
    emit({"server": "benchmarks/fake_server.py", "answer_tokens": args.answer_tokens,
          "server_seed": args.server_seed, "n_eval": args.n_eval,
          "optimizer": args.optimizer, "batch_size": args.batch_size, "budgets": found}, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
