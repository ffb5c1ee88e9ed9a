"""The simulated team's fitted joint outcomes, from MedAgentsBench's published per-question answers.

    python benchmarks/fit_simulated_world.py --root ../shared/medagentsbench/output [--dataset medqa]
        [--model gpt-4o] [--single cot] [--team mdagents]

Prints, for a cheap method (the single agent) against an expensive one (the team) on the questions
both answered: their accuracies, the share only the single agent got right, the share only the team
got right, and the ``shared_difficulty`` of `teammed.backends.simulated` that reproduces the first
share: with probability rho the single agent faces the team's difficulty (right only where a team at
least as good is), else an independent one, so single-only = rho max(0, ps - pt) + (1 - rho) ps (1 - pt).
It also prints what the agreement of the single method with zero-shot says of its correctness.
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
    parser.add_argument("--single", default="cot")
    parser.add_argument("--team", default="mdagents")
    args = parser.parse_args(argv)
    paths = published_files(args.root, dataset=args.dataset, model=args.model, split=args.split)
    runs = {run.method: run for run in read_all(paths)}
    single = {r.id: r for r in runs[args.single].rows}
    team = {r.id: r for r in runs[args.team].rows}
    ids = sorted(single.keys() & team.keys())
    n = len(ids)
    ps, pt = sum(single[i].correct for i in ids) / n, sum(team[i].correct for i in ids) / n
    only_single = sum(single[i].correct and not team[i].correct for i in ids) / n
    only_team = sum(team[i].correct and not single[i].correct for i in ids) / n
    independent, nested = ps * (1 - pt), max(0.0, ps - pt)
    rho = (independent - only_single) / (independent - nested) if independent > nested else float("nan")
    print(f"{args.model} {args.dataset} {args.split}, {n} questions: {args.single} {ps:.1%}, {args.team} {pt:.1%}; "
          f"only {args.single} right {only_single:.1%}, only {args.team} right {only_team:.1%}; "
          f"shared_difficulty {rho:.2f} (nested world: 1; independent: 0)")
    if "zero_shot" in runs and args.single != "zero_shot":
        zero = {r.id: r.prediction for r in runs["zero_shot"].rows}
        agree = [i for i in ids if zero.get(i) == single[i].prediction]
        differ = [i for i in ids if i not in set(agree)]
        rate = lambda group: sum(single[i].correct for i in group) / len(group) if group else float("nan")  # noqa: E731
        print(f"signal (agrees with zero_shot): {len(agree)} agree, {args.single} right on {rate(agree):.1%} of them; "
              f"{len(differ)} differ, right on {rate(differ):.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
