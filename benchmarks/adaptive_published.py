"""The adaptive system's choice on real outcomes: MedAgentsBench's published per-question answers.

No model is called. Stage outcomes come from published files (`teammed.data.published`):

- stage 1, the single agent: one cheap method (``--single``, default ``cot``); its signal is whether
  it agrees with a second cheap method (``--signal-with``, default ``zero_shot``): 1 when they agree,
  0 when not. Stage 1 costs both methods' billed tokens, since the signal needs both answers.
- stage 2, the team: an expensive method (``--team``, default ``mdagents``; several comma-separated),
  at its billed tokens.

Over ``--splits`` random halvings of the questions every file answered, the project's own
`front` and `choose` (`teammed.optimizers.adaptive`) pick an operating point on the tuning half; the
held-out half scores it (`point_of`: the published outcomes decide each question exactly). Per split
the report gives the chosen policy's held-out accuracy and its tokens as a share of always
escalating (stage 1 then the team), with the first stage alone and the second alone beside it.

    python benchmarks/adaptive_published.py --root ../shared/medagentsbench/output --dataset medqa \\
        --model gpt-4o [--split test_hard] [--splits 20] [--out benchmarks/results/adaptive_published.json]

Every figure is a pure function of the files and ``--seed``: a rerun prints the same numbers.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from pathlib import Path
from typing import Any

from teammed.data.published import published_files, read_all
from teammed.evals.stats import natural_key
from teammed.optimizers.adaptive import ALWAYS, Outcome, choose, front, point_of


def outcomes_from_files(root: Path, *, dataset: str, model: str, split: str, single: str, signal_with: str,
                        teams: list[str]) -> list[Any]:
    """One `Outcome` per question every named file answered (matched by text), as described above."""
    files = {m: published_files(root, dataset=dataset, model=model, split=split, method=m)[0]
             for m in dict.fromkeys([single, signal_with, *teams])}
    runs = dict(zip(files, read_all(list(files.values())), strict=True))
    for method, run in runs.items():
        if not run.tokens_reported:
            raise SystemExit(f"{run.path}: reports no token usage, so {method} cannot be priced; pick another method")
    by_id = {m: {row.id: row for row in run.rows} for m, run in runs.items()}
    shared = sorted(set.intersection(*(set(rows) for rows in by_id.values())), key=natural_key)

    def tokens(method: str, qid: str) -> int:
        row = by_id[method][qid]
        return int(row.prompt_tokens or 0) + int(row.completion_tokens or 0)

    return [Outcome(id=qid, signal=float(by_id[single][qid].prediction == by_id[signal_with][qid].prediction),
                    single_correct=by_id[single][qid].correct,
                    single_tokens=tokens(single, qid) + tokens(signal_with, qid),
                    team_correct={t: by_id[t][qid].correct for t in teams},
                    team_tokens={t: tokens(t, qid) for t in teams}) for qid in shared]


def one_split(outcomes: list[Any], k: int, seed: int, tolerance: float) -> dict[str, Any]:
    order = list(outcomes)
    random.Random(f"{seed}:{k}").shuffle(order)
    half = len(order) // 2
    tune, held = order[:half], order[half:]
    found = front(tune, seed=seed)
    chosen = choose(tune, found, tolerance=tolerance)
    target = found.best_static.target
    assert target is not None
    n = len(held)

    def scored(point: Any) -> dict[str, float]:
        if point.target is None:  # the single agent alone
            return {"accuracy": sum(o.single_correct for o in held) / n,
                    "tokens": sum(o.single_tokens for o in held) / n}
        if point.static:
            return {"accuracy": sum(o.team_correct[point.target] for o in held) / n,
                    "tokens": sum(o.team_tokens[point.target] for o in held) / n}
        p = point_of(held, point.threshold, point.target)
        return {"accuracy": p.accuracy, "tokens": p.tokens}

    always = point_of(held, ALWAYS, target)
    mine = scored(chosen)
    stage1 = scored(found.single)
    stage2 = scored(found.best_static)
    return {"split": k, "n_tune": len(tune), "n_eval": n, "chosen": chosen.label(),
            "kind": "single" if chosen.target is None else "static" if chosen.static else "adaptive",
            "held_out": {"chosen": mine, "always_escalate": {"accuracy": always.accuracy, "tokens": always.tokens},
                         "stage1_alone": stage1, "stage2_alone": stage2},
            "token_share_of_always": round(mine["tokens"] / always.tokens, 4),
            "loss_vs_stage2_points": round(100 * (stage2["accuracy"] - mine["accuracy"]), 2),
            "single_better_by_tolerance": stage1["accuracy"] - stage2["accuracy"] > tolerance}


def summarize(splits: list[dict[str, Any]], tolerance: float) -> dict[str, Any]:
    kinds = [s["kind"] for s in splits]
    shares = [s["token_share_of_always"] for s in splits]
    better = [s for s in splits if s["single_better_by_tolerance"]]
    return {"splits": len(splits), "chosen": {k: kinds.count(k) for k in ("single", "adaptive", "static")},
            "token_share_of_always": {"min": min(shares), "median": statistics.median(shares), "max": max(shares)},
            "lost_more_than_tolerance": sum(s["loss_vs_stage2_points"] > 100 * tolerance for s in splits),
            "single_better_on_held_out": len(better),
            "single_chosen_where_better": sum(s["kind"] == "single" for s in better),
            "mean_held_out_accuracy": {name: statistics.fmean(s["held_out"][name]["accuracy"] for s in splits)
                                       for name in ("chosen", "always_escalate", "stage1_alone", "stage2_alone")}}


def markdown(result: dict[str, Any]) -> str:
    a = result["settings"]
    lines = [f"### {a['model']} on {a['dataset']} {a['split']}: stage 1 {a['single']} (signal: agrees with "
             f"{a['signal_with']}), stage 2 {', '.join(a['teams'])}; {result['n_questions']} questions, "
             f"{a['splits']} splits", "",
             "| split | chosen | held-out accuracy: chosen / always / stage 1 / stage 2 | tokens: chosen / always |",
             "|---|---|---|---|"]
    for s in result["per_split"]:
        h = s["held_out"]
        lines.append(f"| {s['split']} | {s['chosen']} | {100 * h['chosen']['accuracy']:.1f} / "
                     f"{100 * h['always_escalate']['accuracy']:.1f} / {100 * h['stage1_alone']['accuracy']:.1f} / "
                     f"{100 * h['stage2_alone']['accuracy']:.1f} | {h['chosen']['tokens']:,.0f} / "
                     f"{h['always_escalate']['tokens']:,.0f} ({s['token_share_of_always']:.2f}) |")
    m = result["summary"]
    lines += ["", f"Chosen: {m['chosen']}; token share of always escalating {m['token_share_of_always']['min']:.2f}–"
                  f"{m['token_share_of_always']['max']:.2f} (median {m['token_share_of_always']['median']:.2f}); "
                  f"lost more than {100 * a['tolerance']:g} point(s) against stage 2 in "
                  f"{m['lost_more_than_tolerance']} of {m['splits']}; the single agent was better than stage 2 by "
                  f"more than the tolerance on held-out questions in {m['single_better_on_held_out']} split(s) and "
                  f"was chosen in {m['single_chosen_where_better']} of them."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, required=True, help="MedAgentsBench's output/ folder")
    parser.add_argument("--dataset", default="medqa")
    parser.add_argument("--model", default="gpt-4o")
    parser.add_argument("--split", default="test_hard")
    parser.add_argument("--single", default="cot")
    parser.add_argument("--signal-with", default="zero_shot")
    parser.add_argument("--teams", default="mdagents")
    parser.add_argument("--splits", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tolerance", type=float, default=0.01)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    teams = [t for t in args.teams.split(",") if t]
    outcomes = outcomes_from_files(args.root, dataset=args.dataset, model=args.model, split=args.split,
                                   single=args.single, signal_with=args.signal_with, teams=teams)
    if len(outcomes) < 4:
        raise SystemExit(f"only {len(outcomes)} questions are answered by every file; need at least 4")
    splits = [one_split(outcomes, k, args.seed, args.tolerance) for k in range(args.splits)]
    agree = [o for o in outcomes if o.signal == 1.0]
    result = {"settings": {**{k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()
                              if k not in ("out", "teams")}, "teams": teams},
              "n_questions": len(outcomes),
              "signal": {"agree": len(agree), "single_right_when_agree": sum(o.single_correct for o in agree),
                         "disagree": len(outcomes) - len(agree),
                         "single_right_when_disagree": sum(o.single_correct for o in outcomes if o.signal != 1.0)},
              "per_split": splits, "summary": summarize(splits, args.tolerance)}
    text = markdown(result)
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
