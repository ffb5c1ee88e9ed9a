"""How often does `tune`'s race drop a configuration that is as good as the best? And how fast a worse one?

Simulated races (pure `teammed.optimizers.tune_race.race`, no LM): ``--configs`` configurations
answer ``--rounds`` rounds of ``--batch`` questions; each question has a shared easiness, so
configurations agree more often than independent coin flips would. Reported per scenario: the
share of the non-winning entrants dropped per race (equal accuracies: every drop is wrong), and,
beside it, the same races judged by the fixed-n one-sided sign test against the post-hoc
incumbent that `tune` used before (``p < alpha`` after any round).

    python benchmarks/racing_error.py --races 500
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Mapping, Sequence

from teammed.optimizers.tune_race import incumbent, one_sided_sign_p, race


def simulate(accuracy: Mapping[str, float], *, rounds: int, batch: int, rng: random.Random) -> tuple[list, dict]:
    ids = [f"q{i}" for i in range(rounds * batch)]
    scores: dict[str, dict[str, bool]] = {c: {} for c in accuracy}
    for q in ids:
        easiness = rng.random()
        for c, a in accuracy.items():
            scores[c][q] = 0.5 * easiness + 0.5 * rng.random() < a
    return [ids[i * batch:(i + 1) * batch] for i in range(rounds)], scores


def fixed_n_drops(labels: Sequence[str], rounds: Sequence[Sequence[str]], scores: Mapping[str, Mapping[str, bool]],
                  *, alpha: float, min_rounds: int) -> set[str]:
    """The rule `tune` used before: after each round, drop a challenger whose one-sided sign test p against
    the incumbent picked on all data so far is below alpha."""
    alive, seen, dropped = list(labels), [], set()
    for r, batch in enumerate(rounds):
        seen.extend(batch)
        if r + 1 < min_rounds or len(alive) <= 1:
            continue
        best = incumbent(alive, scores, {}, list(labels))
        for c in list(alive):
            if c == best:
                continue
            b = sum(scores[c][q] and not scores[best][q] for q in seen)
            lost = sum(scores[best][q] and not scores[c][q] for q in seen)
            if one_sided_sign_p(b, lost) < alpha:
                alive.remove(c)
                dropped.add(c)
    return dropped


def scenario(accuracy: Mapping[str, float], *, races: int, rounds: int, batch: int, alpha: float, seed: int) -> dict:
    rng = random.Random(seed)
    now = {c: 0 for c in accuracy}
    before = {c: 0 for c in accuracy}
    rounds_to_drop: list[int] = []
    for _ in range(races):
        plan, scores = simulate(accuracy, rounds=rounds, batch=batch, rng=rng)
        state = race(list(accuracy), plan, scores, {}, alpha=alpha, min_rounds=2)
        for h in state.history:
            now[h["dropped"]] += 1
            rounds_to_drop.append(h["round"])
        for c in fixed_n_drops(list(accuracy), plan, scores, alpha=alpha, min_rounds=2):
            before[c] += 1
    n = len(accuracy) - 1  # one entrant always survives
    return {"accuracy": dict(accuracy), "races": races, "rounds": rounds, "batch": batch, "alpha": alpha,
            "share_dropped_per_race": round(sum(now.values()) / (races * n), 4),
            "share_dropped_per_race_fixed_n": round(sum(before.values()) / (races * n), 4),
            "dropped_by_config": {c: round(v / races, 4) for c, v in now.items()},
            "mean_round_of_a_drop": round(sum(rounds_to_drop) / len(rounds_to_drop), 2) if rounds_to_drop else None}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--races", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--batch", type=int, default=10)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    common = {"races": args.races, "rounds": args.rounds, "batch": args.batch, "alpha": args.alpha, "seed": args.seed}
    out = {
        "8 equal (0.6)": scenario({f"c{i}": 0.6 for i in range(8)}, **common),
        "12 equal (0.6)": scenario({f"c{i}": 0.6 for i in range(12)}, **common),
        "one at 0.5 among 0.7": scenario({"worse": 0.5, **{f"c{i}": 0.7 for i in range(7)}}, **common),
        "one at 0.6 among 0.7": scenario({"worse": 0.6, **{f"c{i}": 0.7 for i in range(7)}}, **common),
    }
    json.dump(out, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
