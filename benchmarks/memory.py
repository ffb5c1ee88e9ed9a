"""Peak RSS of `teammed run --preset all` at two run lengths, and its slope per question (not a test).

Every call goes to the in-process simulated team (no server, no latency), so the figure is the
framework's own memory: what a run keeps per finished question plus what the allocator does not
give back. Each tree runs through the same launcher as `benchmarks/run.py`.

    python benchmarks/memory.py [--tree .] [--sizes 100 400] [--concurrency 16] [--model simulated]

Then ``teammed report`` over the larger run (its peak RSS too): a report reads a run's rows once.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.run import run_teammed, write_questions  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", type=Path, default=Path("."), help="the source tree to measure")
    parser.add_argument("--sizes", type=int, nargs=2, default=(100, 400), metavar=("N1", "N2"))
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--model", default="simulated", help="simulated (default) or scripted")
    args = parser.parse_args(argv)
    n1, n2 = args.sizes
    with tempfile.TemporaryDirectory(prefix="teammed-memory-") as tmp:
        work = Path(tmp)
        questions = write_questions(work / "questions.jsonl", n2)
        rss = {}
        for n in (n1, n2):
            out = work / f"run-{n}"
            shutil.rmtree(out, ignore_errors=True)
            proc = run_teammed(args.tree.resolve(), [
                "run", "--dataset", str(questions), "--split", "all", "--n", str(n), "--preset", "all",
                "--model", args.model, "--no-cache", "--out", str(out), "--concurrency", str(args.concurrency)],
                cwd=work)
            rss[n] = proc.maxrss_mib
            print(f"peak RSS, {n} questions: {rss[n]:.1f} MiB", flush=True)
        proc = run_teammed(args.tree.resolve(), ["report", str(work / f"run-{n2}"), "--out", str(work / "report")],
                           cwd=work)
        print(f"peak RSS of report over the {n2}-question run: {proc.maxrss_mib:.1f} MiB", flush=True)
    slope = (rss[n2] - rss[n1]) / (n2 - n1)
    at_1273 = rss[n2] + slope * (1273 - n2)
    print(f"slope: {slope:.3f} MiB / question; extrapolated to 1,273 questions: {at_1273:.0f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
