"""MedAgentsBench's published methods on one data set and model, from the files (no model is called).

    python benchmarks/published_table.py --root ../shared/medagentsbench/output --dataset medqa --model gpt-4o

Prints one markdown row per published method: accuracy as published (the gold letter exactly) and
billed tokens per question ("not reported" where the file has none).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    from teammed.data.published import published_files, read_all

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--dataset", default="medqa")
    parser.add_argument("--model", default="gpt-4o")
    parser.add_argument("--split", default="test_hard")
    args = parser.parse_args(argv)
    paths = published_files(args.root, dataset=args.dataset, model=args.model, split=args.split)
    print("| method | n | accuracy | tokens / question | seconds / question | notes |")
    print("|---|---:|---:|---:|---:|---|")
    for run in read_all(paths):
        s = run.summary()
        tokens = "not reported" if s.tokens_per_question is None else f"{s.tokens_per_question:,.0f}"
        seconds = "" if s.seconds_per_question is None else f"{s.seconds_per_question:.1f}"
        print(f"| {run.method} | {s.n} | {100 * (s.accuracy or 0):.0f}% | {tokens} | {seconds} | "
              f"{'; '.join(run.notes())} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
