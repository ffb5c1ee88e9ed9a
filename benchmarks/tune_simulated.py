"""Does `tune` find the planted best configuration of the simulated team, and at what cost?

For each seed: fresh simulated tuning and held-out questions, `tune` (stages 1-4, no prompt
optimizer: the simulated team ignores prompts) and today's `search` (TPE with median
pruning, the same tuning questions) on the same planted table. Reported per seed and in
total: whether each found the planted best, and the LM calls it spent on tuning questions
(`tune`'s held-out proof is counted apart), against the calls evaluating every valid subset on
the same tuning questions takes (each subset's calls per question, measured on the first
``--probe`` questions and checked constant, times the number of tuning questions).

    python benchmarks/tune_simulated.py --seeds 10 --n-tune 150 --n-eval 100 --search-trials 12
    python benchmarks/tune_simulated.py --table hidden_interaction --equal-cost   # also noisy, small_effects

``--equal-cost`` adds the baseline of evaluating whole configurations, in a random order, within
the calls `tune` spent on tuning questions.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from teammed.backends.simulated import PLANTED_TABLES, SimulatedTeamLM, answer_key, simulated_questions  # noqa: E402
from teammed.config import COMPONENTS, config_from_components  # noqa: E402
from teammed.optimizers._scoring import score_questions  # noqa: E402
from teammed.optimizers._space import subset_label, valid_subsets  # noqa: E402
from teammed.optimizers.search import search_special_set  # noqa: E402
from teammed.optimizers.tune import TuneSettings, tune  # noqa: E402
from teammed.programs.teamwork import TeamworkProgram  # noqa: E402


def exhaustive_calls(questions, lm, probe: int) -> tuple[int, dict[str, float]]:
    """Calls to evaluate every valid subset on ``questions``: measured calls/question times len(questions)."""
    per_config = {}
    probed = questions[:probe]
    for subset in valid_subsets(min_turns=2):
        rows = score_questions(TeamworkProgram(config_from_components(list(subset))), probed, lm)
        calls = [r.calls for r in rows]
        if len(set(calls)) != 1:
            print(f"warning: {subset_label(subset)} calls vary per question: {calls}", file=sys.stderr)
        per_config[subset_label(subset)] = sum(calls) / len(calls)
    return round(sum(per_config.values()) * len(questions)), per_config


def run_equal_cost(questions, lm, per_config: dict[str, float], calls: int, seed: int) -> dict:
    """Exhaustive evaluation cut to ``calls``: whole configurations on every tuning question, in a seeded
    random order, while their calls fit; the most accurate of them is the answer."""
    order = list(per_config)
    random.Random(seed).shuffle(order)
    chosen, spent = [], 0.0
    for label in order:
        cost = per_config[label] * len(questions)
        if spent + cost > calls:
            continue
        chosen.append(label)
        spent += cost
    best, best_acc = None, -1.0
    for label in chosen:
        parts = [] if label == "base" else [c for c in label.split("+") if c in COMPONENTS]
        rows = score_questions(TeamworkProgram(config_from_components(parts)), questions, lm)
        accuracy = sum(bool(r.correct) for r in rows) / len(rows)
        if accuracy > best_acc:
            best, best_acc = label, accuracy
    return {"found": best, "configs": len(chosen), "of": len(per_config), "calls": round(spent)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--n-tune", type=int, default=150)
    ap.add_argument("--n-eval", type=int, default=100)
    ap.add_argument("--probe", type=int, default=5)
    ap.add_argument("--search-trials", type=int, default=12, help="0 skips today's search")
    ap.add_argument("--table", default="default", choices=sorted(PLANTED_TABLES),
                    help="the planted world (teammed.backends.simulated.PLANTED_TABLES)")
    ap.add_argument("--equal-cost", action="store_true",
                    help="also evaluate whole configurations at random within tune's tuning calls")
    ap.add_argument("--out", type=Path, help="default: benchmarks/results/tune_simulated[_<table>].json")
    args = ap.parse_args(argv)
    table = PLANTED_TABLES[args.table]
    suffix = "" if args.table == "default" else f"_{args.table}"
    args.out = args.out or Path(f"benchmarks/results/tune_simulated{suffix}.json")
    logging.basicConfig(level=logging.WARNING)
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    planted = subset_label(table.best(valid_subsets(min_turns=2)))
    per_seed = []
    for seed in range(args.seeds):
        started = time.perf_counter()
        tq = simulated_questions(args.n_tune, seed=seed, prefix="tune")
        eq = simulated_questions(args.n_eval, seed=seed, prefix="heldout")
        lm = SimulatedTeamLM(answer_key(tq + eq), seed=seed, table=table)
        full, per_config = exhaustive_calls(tq, lm, args.probe)
        with tempfile.TemporaryDirectory() as tmp:
            out = tune(tune_questions=tq, eval_questions=eq, lm=lm,
                       settings=TuneSettings(dataset="simulated", model="simulated", optimizer="none", seed=seed),
                       budget=None,
                       storage=":memory:", study_name=f"tune-{seed}", out_dir=tmp)
            search = None
            if args.search_trials:  # today's search, on the same tuning questions
                before = lm.n_calls
                result = search_special_set(questions=tq, lm=lm, trials=args.search_trials, study_name=f"search-{seed}",
                                            out_dir=Path(tmp), seed=seed, batch_size=10)
                search = {"found": subset_label(result.components), "calls": lm.n_calls - before}
        r = out.report
        equal = (run_equal_cost(tq, lm, per_config, r["spent"]["tuning_calls"], seed) if args.equal_cost
                 else None)
        row = {"seed": seed, "planted": planted, "tune_found": r["winner"], "tune_ok": r["winner"] == planted,
               "tune_tuning_calls": r["spent"]["tuning_calls"], "tune_proof_calls": r["spent"]["proof_calls"],
               "exhaustive_calls": full, "tune_share": round(r["spent"]["tuning_calls"] / full, 4),
               "reuse_rate": r["spent"]["reuse_rate"], "rounds": r["racing"]["rounds"],
               "held_out": {k: v["accuracy"] for k, v in r["held_out"].items()},
               "p_vs_base": r["held_out_comparison"]["base"]["p_mcnemar"],
               "seconds": round(time.perf_counter() - started, 1)}
        if search:
            row.update(search_found=search["found"], search_ok=search["found"] == planted,
                       search_calls=search["calls"], search_share=round(search["calls"] / full, 4))
        if equal:
            row.update(equal_cost_found=equal["found"], equal_cost_ok=equal["found"] == planted,
                       equal_cost_configs=f"{equal['configs']} of {equal['of']}")
        per_seed.append(row)
        print(json.dumps(row), flush=True)
    summary = {"planted": planted, "table_name": args.table, "table": table.describe(), "seeds": args.seeds,
               "n_tune": args.n_tune,
               "n_eval": args.n_eval, "tune_found": sum(r["tune_ok"] for r in per_seed),
               "tune_share_max": max(r["tune_share"] for r in per_seed),
               "tune_share_mean": round(sum(r["tune_share"] for r in per_seed) / len(per_seed), 4)}
    if args.search_trials:
        summary.update(search_trials=args.search_trials, search_found=sum(r["search_ok"] for r in per_seed),
                       search_share_mean=round(sum(r["search_share"] for r in per_seed) / len(per_seed), 4))
    if args.equal_cost:
        summary.update(equal_cost_found=sum(r["equal_cost_ok"] for r in per_seed))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"summary": summary, "per_seed": per_seed}, indent=2) + "\n")
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
