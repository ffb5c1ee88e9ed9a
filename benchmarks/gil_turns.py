"""Does a longer GIL switch interval help 256 questions in flight? (not a test; not in CI)

Alternates `teammed run` (base team, 256 in flight, 512 questions, 0.5 s server) under Python's
default switch interval (5 ms) and a longer one (`sys.setswitchinterval`), in pairs whose order
alternates (a pair run in a fixed order measured the machine speeding up, not the interval),
and prints each pair's slot efficiency (question phase and its middle half) from the server log.

    python benchmarks/gil_turns.py [--pairs 5] [--interval 0.05]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from benchmarks.run import Server, slot_busy_s, window_efficiency, write_questions  # noqa: E402

SLOTS, N = 256, 512
LAUNCH = "import sys; sys.setswitchinterval(float(sys.argv.pop(1))); from teammed.cli import console_main; " \
         "sys.exit(console_main())"


def one(work: Path, questions: Path, interval: float, tag: str) -> tuple[float, float]:
    with Server(latency_s=0.5, log=work / f"{tag}.requests.jsonl") as server:
        args = ["run", "--dataset", str(questions), "--n", str(N), "--preset", "base", "--n-agents", "3",
                "--n-turns", "2", "--model", "openai/fake", "--api-base", server.api_base, "--no-cache",
                "--out", str(work / tag), "--concurrency", str(SLOTS), "--max-parallel-requests", str(SLOTS),
                "--retry-attempts", "3", "--retry-base", "0.05"]
        done = subprocess.run([sys.executable, "-c", LAUNCH, str(interval), *args], capture_output=True, text=True,
                              cwd=work)
        if done.returncode != 0:
            raise RuntimeError(done.stderr[-2000:])
        requests = server.requests()
    phase = max(r["end"] for r in requests) - min(r["start"] for r in requests)
    return slot_busy_s(requests) / (SLOTS * phase), window_efficiency(requests, SLOTS)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--interval", type=float, default=0.05, help="the longer switch interval, seconds")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="teammed-gil-"))
    questions = write_questions(work / "questions.jsonl", N, eval_only=True)
    print(f"{'pair':>4}  {'5 ms: phase / steady':>22}  {f'{args.interval * 1000:g} ms: phase / steady':>24}")
    results = []
    for i in range(args.pairs):  # ABBA: the order alternates, so a drift of the machine favours neither
        if i % 2 == 0:
            default = one(work, questions, 0.005, f"default-{i}")
            longer = one(work, questions, args.interval, f"longer-{i}")
        else:
            longer = one(work, questions, args.interval, f"longer-{i}")
            default = one(work, questions, 0.005, f"default-{i}")
        results.append((default, longer))
        print(f"{i + 1:>4}  {default[0]:>10.3f} / {default[1]:.3f}  {longer[0]:>12.3f} / {longer[1]:.3f}", flush=True)
    wins = sum(longer[0] > default[0] for default, longer in results)
    mean = [sum(r[k][0] for r in results) / len(results) for k in (0, 1)]
    print(f"longer better in {wins} of {len(results)} pairs; mean phase efficiency {mean[0]:.3f} -> {mean[1]:.3f}")
    print(json.dumps({"pairs": results}), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
