"""How long the dry runs take (issue 48, item 4): each long command's ``--dry-run`` on MedQA's hard set, wall
time of the command as a user runs it (a fresh process, imports included). Not a test; not in CI.

The questions are those of MedAgentsBench's published files (``--published``: its MedQA hard set, as the
data folder's default split); the model is named
``openai/gpt-4o-mini`` at a server that is never contacted (a dry run sends nothing). Each command runs
``--repeat`` times; the median is reported.

    python benchmarks/dry_run_times.py --published ../shared/medagentsbench/output [--repeat 3] [--out FILE.json]
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
sys.path.insert(0, str(HERE))

from pilot_accuracy import write_medqa  # noqa: E402

BACKEND = ["--model", "openai/gpt-4o-mini", "--api-base", "http://127.0.0.1:9/v1", "--no-cache", "--dry-run"]


def commands(data: Path, published: Path) -> dict[str, list[str]]:
    medqa = ["--dataset", "medqa", "--data-dir", str(data)]
    return {
        "run --preset all, 50 questions": ["run", *medqa, "--n", "50", "--preset", "all", "--n-agents", "3"],
        "run --system mdagents, 50 questions": ["run", *medqa, "--n", "50", "--system", "mdagents"],
        "search --adaptive, 50 questions": ["search", *medqa, "--n", "50", "--trials", "16", "--adaptive"],
        "reproduce medagentsbench (Zero-Shot, CoT), 50 questions": [
            "reproduce", "medagentsbench", "--data-dir", str(data), "--datasets", "medqa", "--split", "test",
            "--n", "50", "--rows", "Zero-Shot;CoT", "--published", str(published)],
        "tune calls=20000, the default settings": ["tune", *medqa, "--budget", "calls=20000"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--published", type=Path, required=True)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    found = {}
    with tempfile.TemporaryDirectory() as tmp:
        data = write_medqa(args.published, Path(tmp) / "data")
        hard = data / "medqa" / "test_hard.jsonl"  # the default split too: tune and reproduce read it
        (data / "medqa" / "test.jsonl").write_text(hard.read_text())
        for name, argv_ in commands(data, args.published).items():
            times, code, err = [], 0, ""
            for _ in range(args.repeat):
                started = time.perf_counter()
                done = subprocess.run(["teammed", *argv_, *BACKEND], capture_output=True, text=True, env=env,
                                      cwd=tmp)
                times.append(time.perf_counter() - started)
                code, err = done.returncode, done.stderr[-400:]
            found[name] = {"seconds": round(statistics.median(times), 1), "runs": [round(t, 1) for t in times],
                           "exit": code, **({"stderr": err} if code else {})}
            print(f"{name}: {found[name]['seconds']} s (exit {code})", flush=True)
    text = json.dumps({"commands": found}, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
