"""Which interpreter settings help 256 questions in flight? (not a test; not in CI)

Runs `teammed run` (base team, 256 in flight, 512 questions, 0.5 s server) once per arm per round,
each arm a line of Python run before the CLI starts (a GIL switch interval, a garbage-collector
setting, ...). The order of the arms rotates from round to round (a fixed order measures the
machine speeding up or slowing down, not the arm). Prints, per run, the slot efficiency over the
question phase and over its middle half (from the server log) and the framework's CPU per LM call
(the `teammed` process's user + system time over the calls the server answered), then each arm's
median.

    python benchmarks/runtime_arms.py [--rounds 4] [--arms default,gc-tuned-off] [--n 512]

Arms (``--list`` prints them): ``default`` runs the CLI as shipped; the others are in ``ARMS``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from benchmarks.run import Server, slot_busy_s, window_efficiency, write_questions  # noqa: E402

SLOTS = 256
ARMS = {
    "default": "pass",
    # what `teammed run` did before issue 34 (teammed.runtime.quiet_collector, removed): one collection,
    # gc.freeze, a young collection every 10,000 allocations (Python's: 700)
    "gc-quiet": "import gc; gc.collect(); gc.freeze(); gc.set_threshold(10_000, *gc.get_threshold()[1:])",
    # a longer GIL switch interval (Python's: 5 ms)
    "switch-50ms": "import sys; sys.setswitchinterval(0.05)",
    "gc-off": "import gc; gc.disable()",
}
LAUNCH = "import sys; exec(sys.argv.pop(1)); from teammed.cli import console_main; sys.exit(console_main())"


def one(work: Path, questions: Path, n: int, prelude: str, tag: str) -> tuple[float, float, float]:
    """(question-phase efficiency, middle-half efficiency, CPU ms per LM call) of one run."""
    with Server(latency_s=0.5, log=work / f"{tag}.requests.jsonl") as server:
        args = ["run", "--dataset", str(questions), "--n", str(n), "--preset", "base", "--n-agents", "3",
                "--n-turns", "2", "--model", "openai/fake", "--api-base", server.api_base, "--no-cache",
                "--out", str(work / tag), "--concurrency", str(SLOTS), "--max-parallel-requests", str(SLOTS),
                "--retry-attempts", "3", "--retry-base", "0.05"]
        env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "OPENAI_API_KEY": "sk-fake-benchmark"}
        proc = subprocess.Popen([sys.executable, "-c", LAUNCH, prelude, *args], cwd=work, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise RuntimeError(f"{tag}: {proc.stderr.read()[-2000:] if proc.stderr else ''}")
        time.sleep(0.2)
        requests = server.requests()
    phase = max(r["end"] for r in requests) - min(r["start"] for r in requests)
    cpu_ms = 1000 * (usage.ru_utime + usage.ru_stime) / len(requests)
    return slot_busy_s(requests) / (SLOTS * phase), window_efficiency(requests, SLOTS), cpu_ms


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--arms", default="default,gc-quiet", help=f"comma-separated, of {', '.join(ARMS)}")
    parser.add_argument("--n", type=int, default=2 * SLOTS, help="questions per run (all of the evaluation part)")
    parser.add_argument("--list", action="store_true", help="print the arms and their preludes")
    args = parser.parse_args(argv)
    if args.list:
        for name, prelude in ARMS.items():
            print(f"{name}:\n    " + prelude.replace("\n", "\n    "))
        return 0
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    if unknown := [a for a in arms if a not in ARMS]:
        raise SystemExit(f"unknown arms {unknown}; --list prints them")
    work = Path(tempfile.mkdtemp(prefix="teammed-arms-"))
    questions = write_questions(work / "questions.jsonl", args.n, eval_only=True)
    results: dict[str, list[tuple[float, float, float]]] = {a: [] for a in arms}
    print(f"{'round':>5}  {'arm':<14} {'phase':>6} {'steady':>6} {'CPU ms/call':>11}", flush=True)
    for i in range(args.rounds):
        k = i % len(arms)
        for arm in arms[k:] + arms[:k]:  # the order rotates from round to round
            figure = one(work, questions, args.n, ARMS[arm], f"{arm}-{i}")
            results[arm].append(figure)
            print(f"{i + 1:>5}  {arm:<14} {figure[0]:>6.3f} {figure[1]:>6.3f} {figure[2]:>11.2f}", flush=True)
    print("median over rounds:")
    for arm, figures in results.items():
        med = [statistics.median(f[j] for f in figures) for j in range(3)]
        print(f"       {arm:<14} {med[0]:>6.3f} {med[1]:>6.3f} {med[2]:>11.2f}")
    print(json.dumps(results), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
