"""`reproduce 001-table1`: the TeamMedAgents paper's Table 1 protocol, with its numbers beside ours.

The protocol, the rows and the table's tests are described in docs/commands/reproduce.md. Every cell
(data set x row x seed) is one trial of one study (`tune_queue.WorkQueue`), so the grid resumes and is
shared by every machine on the storage.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import dspy

from teammed.config import preset
from teammed.errors import ConfigError, TeammedError
from teammed.optimizers._scoring import cell_result, score_questions
from teammed.optimizers.tune_queue import Budget, WorkQueue, cell_key
from teammed.records import write_atomic
from teammed.types import Question

if TYPE_CHECKING:
    from teammed.results import ResultRow

__all__ = ["PROTOCOLS", "TABLE1_001", "DATASETS_001", "ROWS_001", "reproduce_table1", "ReproduceSettings",
           "load_paper_datasets", "Table1Result", "Budget", "open_protocol_study"]

logger = logging.getLogger(__name__)

# Published Table 1 of 001 (GPT-4o, 3 runs, mean ± SE); rows x data-set codes.
_PUBLISHED_TEXT = """
Zero-Shot 86.7 1.2 69.3 7.0 66.0 4.0 82.0 6.0 68.0 7.2 77.3 3.1 72.0 3.5 47.3 3.1
Few-Shot 90.0 1.2 67.3 6.4 66.7 5.0 81.3 2.3 68.0 3.5 81.3 3.1 73.3 1.2 41.3 1.2
CoT 77.3 3.1 72.0 8.0 62.0 7.2 77.3 3.1 66.0 8.0 66.0 6.0 74.7 2.3 52.0 2.0
Leadership 89.0 5.0 71.7 1.1 79.3 3.3 83.7 2.3 72.3 2.7 76.0 2.8 69.3 0.9 45.3 3.8
Mut.Monitor. 89.0 5.0 73.3 2.8 83.0 1.5 81.0 2.0 74.0 2.4 81.0 5.7 73.3 2.5 54.0 1.6
SharedModel 86.3 3.6 72.7 4.4 84.0 2.0 83.7 2.7 68.7 1.4 79.0 2.8 76.0 1.6 56.7 2.5
TeamOrient. 88.3 2.1 71.0 2.2 81.0 3.0 85.0 2.7 72.0 2.5 76.7 2.1 68.0 2.8 56.7 3.4
Mut.Trust 90.0 4.0 72.7 1.8 82.0 2.0 80.3 2.9 70.7 2.3 81.7 2.1 72.0 1.6 52.7 3.4
AllCompon. 91.3 3.0 69.3 1.7 82.0 2.7 82.3 1.5 72.3 2.6 77.7 2.1 74.7 2.5 43.3 3.8
MDAgents 88.7 4.0 75.0 1.0 80.7 2.0 80.8 1.1 80.8 1.7 77.9 2.1 65.3 3.9 56.4 4.5
TeamMed 92.7 2.7 76.7 3.4 84.0 4.0 85.0 2.0 74.0 2.0 78.0 5.3 76.0 4.1 56.7 4.1
"""
DATASETS_001 = {"MQA": "medqa", "PQA": "pubmedqa", "MML": "mmlu_pro", "MMC": "medmcqa", "MBL": "medbullets",
                "DDX": "ddxplus", "PVQ": "pathvqa", "PMC": "pmc_vqa"}
TABLE1_001: dict[str, dict[str, tuple[float, float]]] = {
    name: {code: (float(values[2 * i]), float(values[2 * i + 1])) for i, code in enumerate(DATASETS_001)}
    for name, *values in map(str.split, _PUBLISHED_TEXT.strip().splitlines())}

# Row -> (published row name or "" when the paper has none, what runs it, its name): a peer system,
# a preset, or the tuned special set. "All Compon." is 001's five components; closed loop, the
# sixth component (000), has no row in 001's Table 1 and is measured as a row of its own.
ROWS_001: dict[str, tuple[str, str, str]] = {
    "Zero-Shot": ("Zero-Shot", "system", "zero_shot"),
    "Few-Shot": ("Few-Shot", "system", "few_shot"),
    "CoT": ("CoT", "system", "cot"),
    "Leadership": ("Leadership", "preset", "leadership"),
    "Mut. Monitor.": ("Mut.Monitor.", "preset", "mutual_monitoring"),
    "Shared Model": ("SharedModel", "preset", "smm"),
    "Team Orient.": ("TeamOrient.", "preset", "team_orientation"),
    "Mut. Trust": ("Mut.Trust", "preset", "trust"),
    "All Compon.": ("AllCompon.", "preset", "all5"),
    "Closed Loop": ("", "preset", "closed_loop"),
    "MDAgents": ("MDAgents", "system", "mdagents"),
    "TeamMed (tuned)": ("TeamMed", "special", ""),
    # beyond the paper (issue 37): the single agent, escalating to the tuned row's Special Set below the
    # threshold `teammed.optimizers.adaptive` chose on the tuning questions; asked for by name (--rows)
    "TeamMed (adaptive)": ("", "adaptive", ""),
}
DEFAULT_ROWS_001 = tuple(row for row in ROWS_001 if ROWS_001[row][1] != "adaptive")
# The paper's protocol: every published cell is the mean ± SE of 3 seeds x 50 questions.
PAPER_SEEDS, PAPER_N = 3, 50
PROTOCOLS = ("001-table1",)
# a cell tested with the binomial SE (one seed, or seeds that agree) needs this many expected right and
# wrong answers under the published accuracy for the SE's normal approximation to hold (n p >= 5)
MIN_EXPECTED = 5


@dataclass(frozen=True)
class ReproduceSettings:
    model: str
    server: str = ""  # where the answers come from besides the model's name
    seeds: tuple[int, ...] = (111, 222, 333)
    n: int = 50
    rows: tuple[str, ...] = DEFAULT_ROWS_001
    tune_budget: str = "calls=20000"


@dataclass
class Table1Result:
    rows: list[dict[str, Any]]
    unavailable: dict[str, str]
    special_sets: dict[str, Any] = field(default_factory=dict)
    markdown: str = ""


def row_program(row: str, pool: Sequence[Question], seed: int) -> dspy.Module:
    """The system of a Table 1 row but the tuned one; ``pool``: the labeled questions worked examples
    (Few-Shot, MDAgents) are drawn from."""
    _, kind, what = ROWS_001[row]
    if kind == "preset":
        from teammed.programs.teamwork import TeamworkProgram

        return TeamworkProgram(preset(what))
    from teammed.programs.peers import build_with_examples

    return build_with_examples(what, pool, seed=seed)


def reproduce_table1(
    *,
    datasets: Mapping[str, Sequence[Question] | str],
    lm: dspy.BaseLM,
    settings: ReproduceSettings,
    storage: str | None,
    study_name: str,
    out_dir: Path,
    tune_special: Callable[[str, Sequence[Question], Sequence[Question]], Mapping[str, Any]] | None = None,
) -> Table1Result:
    """Run (or resume) the grid; ``datasets`` maps a code to its questions, or to why it is unavailable.
    ``tune_special(code, tuning, held_out)`` returns the tuned row's ``config``, ``program`` and ``proven``."""
    _check_rows(settings.rows)
    study = open_protocol_study(storage, study_name, out_dir, {  # another model, server, seeds or n is refused
        "protocol": "001-table1", "model": settings.model, "server": settings.server, "seeds": list(settings.seeds),
        "n": settings.n})
    unavailable = {code: q for code, q in datasets.items() if isinstance(q, str)}
    available = {code: list(q) for code, q in datasets.items() if not isinstance(q, str)}
    cell_questions: dict[tuple[str, int], list[Question]] = {}
    pools: dict[str, list[Question]] = {}  # worked examples of Few-Shot and MDAgents: the tune part only
    special: dict[str, Any] = {}
    for code, questions in available.items():
        pools[code] = _prepare(code, questions, settings, cell_questions, special, tune_special)
        if "TeamMed (adaptive)" in settings.rows:
            special[code]["adaptive"] = _adaptive_policy(study, code, special[code], pools[code], lm, settings)
    by_id = {(code, seed): {q.id: q for q in qs} for (code, seed), qs in cell_questions.items()}

    def execute(cell: dict[str, Any]) -> dict[str, Any]:
        program = _program_for(cell["row"], cell["dataset"], cell["seed"], pools, special)
        return _scored(cell["row"], score_questions(program, list(by_id[(cell["dataset"], cell["seed"])].values()), lm))

    cells = [_cell_of(code, row, seed, special)
             for code in available for row in settings.rows for seed in settings.seeds]
    done = WorkQueue(study).run(cells, execute)
    table = _table(cells, done, settings, special)
    result = Table1Result(table, unavailable, special, _markdown(table, unavailable, settings))
    write_atomic(out_dir / "table1.json", json.dumps({"rows": table, "unavailable": unavailable,
                                                      "special_sets": special, "settings": settings.__dict__},
                                                     indent=2, default=str) + "\n")
    write_atomic(out_dir / "table1.md", result.markdown)
    return result


def _check_rows(rows: Sequence[str]) -> None:
    unknown = [r for r in rows if r not in ROWS_001]
    if unknown:
        raise ConfigError(f"unknown Table 1 rows {unknown}; choose from {', '.join(ROWS_001)}")
    if "TeamMed (adaptive)" in rows and "TeamMed (tuned)" not in rows:
        raise ConfigError("the adaptive row escalates to the tuned row's Special Set; keep the row "
                          "'TeamMed (tuned)' in --rows")


def open_protocol_study(storage: str | None, study_name: str, out_dir: Path, identity: Mapping[str, Any]) -> Any:
    """A reproduce protocol's study, recording ``identity`` (protocol, model, server, sample) when new and
    refusing to resume one recorded with another."""
    from teammed.optimizers.tune import open_tune_study

    study, _ = open_tune_study(storage, study_name, out_dir)
    previous = study.user_attrs.get("reproduce")
    identity = dict(identity)
    if previous is None:
        study.set_user_attr("reproduce", identity)
    elif previous != identity:
        raise ConfigError(f"study {study_name!r} reproduces {previous}, not {identity}; repeat its flags or choose "
                          f"another --study")
    return study


def _prepare(code: str, questions: list[Question], settings: ReproduceSettings,
             cell_questions: dict[tuple[str, int], list[Question]], special: dict[str, Any],
             tune_special: Callable[[str, Sequence[Question], Sequence[Question]], Mapping[str, Any]] | None,
             ) -> list[Question]:
    """One data set's cell questions (its held-out part) and tuned row (its tune part); returns the
    labeled tuning pool (worked examples, the adaptive row's tuning questions)."""
    from teammed.data.sampling import sample_questions
    from teammed.data.splits import partition

    held_out = partition(questions, part="eval")
    for seed in settings.seeds:
        cell_questions[(code, seed)] = sample_questions(held_out, n=settings.n, seed=seed)
    if "TeamMed (tuned)" in settings.rows:
        if tune_special is None:
            raise ConfigError("the tuned row needs a tuner; pass tune_special= or leave the row out")
        used = {q.id for qs in (cell_questions[(code, s)] for s in settings.seeds) for q in qs}
        special[code] = dict(tune_special(code, partition(questions, part="tune"),
                                          [q for q in held_out if q.id not in used] or held_out))
    return [q for q in partition(questions, part="tune") if q.answer_idx]


def _program_for(row: str, code: str, seed: int, pools: Mapping[str, list[Question]],
                 special: Mapping[str, Any]) -> dspy.Module:
    kind = ROWS_001[row][1]
    if kind == "adaptive":
        from teammed.programs.peers.adaptive import AdaptiveTeam

        return AdaptiveTeam(_tuned(special[code]), threshold=special[code]["adaptive"]["threshold"])
    if kind == "special":
        return _tuned(special[code])
    from teammed.systems import takes_examples

    if takes_examples(ROWS_001[row][2]) and not pools[code]:
        raise ConfigError(f"{row} needs worked examples, but the tune part of {code} has no labeled "
                          f"question; leave the row out or give a larger data set")
    return row_program(row, pools[code], seed)


def _scored(row: str, rows: Sequence[ResultRow]) -> dict[str, Any]:
    """A finished cell as the queue keeps it (the adaptive row: how many questions its team answered)."""
    done = cell_result(rows)
    if ROWS_001[row][1] == "adaptive":
        done["escalated"] = sum(getattr(r.record, "stage", None) == "team" for r in rows)
    return done


def _cell_of(code: str, row: str, seed: int, special: Mapping[str, Any]) -> dict[str, Any]:
    """A cell's key: the tuned configuration (and the adaptive threshold) it ran with; the MDAgents cells
    name their variant, so a study resumed from before variants never passes old lighter cells off."""
    kind = ROWS_001[row][1]
    cell: dict[str, Any] = {"kind": "table1", "dataset": code, "row": row, "seed": seed,
                            "special": special.get(code, {}).get("config") if kind in ("special", "adaptive") else None}
    if kind == "adaptive":
        cell["threshold"] = special[code]["adaptive"]["threshold"]
    if row == "MDAgents":
        cell["variant"] = _mdagents_variant()[0]
    return cell


def _tuned(found: Mapping[str, Any]) -> dspy.Module:
    """The tuned row's program (its compiled prompts and configuration)."""
    from teammed.programs.load import load_program

    return load_program(found["program"], system="teamwork")[0]


def _adaptive_policy(study: Any, code: str, found: Mapping[str, Any], pool: Sequence[Question], lm: dspy.BaseLM,
                     settings: ReproduceSettings) -> dict[str, Any]:
    """The adaptive row's threshold, chosen on up to ``settings.n`` tuning questions (the tune part: the
    cells' questions are never among them); kept in the study, so a resumed table reuses it."""
    from teammed.data.sampling import sample_questions
    from teammed.optimizers.adaptive import choose, front, measure, policy_threshold

    key = f"adaptive:{code}"
    if key in study.user_attrs:
        return dict(study.user_attrs[key])
    tuning = sample_questions(list(pool), n=settings.n, seed=0)
    if not tuning:
        raise ConfigError(f"the adaptive row needs labeled tuning questions, and the tune part of {code} has none")
    outcomes = measure(tuning, lm, {"special": _tuned(found)})
    chosen = choose(outcomes, front(outcomes))
    policy = {"threshold": policy_threshold(chosen), "static": chosen.static, "single": chosen.target is None,
              "tuning_accuracy": chosen.accuracy, "tuning_tokens": chosen.tokens, "n": len(tuning)}
    study.set_user_attr(key, policy)
    return policy


def _table(cells: Sequence[Mapping[str, Any]], done: Mapping[str, Mapping[str, Any]],
           settings: ReproduceSettings, special: Mapping[str, Mapping[str, Any]] | None = None) -> list[dict[str, Any]]:
    from teammed.evals.stats import cell_estimate, holm

    per: dict[tuple[str, str], dict[int, Mapping[str, Any]]] = {}
    for cell in cells:
        per.setdefault((cell["row"], cell["dataset"]), {})[cell["seed"]] = done[cell_key(cell)]
    out = []
    for (row, code), by_seed in per.items():
        sizes = [len(r["ids"]) for r in by_seed.values()]
        distinct = len({str(i) for r in by_seed.values() for i in r["ids"]})
        est = (cell_estimate([r["value"] for r in by_seed.values()], sizes, distinct=distinct)
               if min(sizes, default=0) else None)
        mean, se = (100 * est.mean, 100 * est.se) if est is not None else (0.0, 0.0)
        baseline = per.get(("Zero-Shot", code)) if row != "Zero-Shot" else None
        out.append({"row": row, "dataset": code, "measured": round(mean, 2), "measured_se": round(se, 2),
                    "measured_se_source": est.source if est is not None else None,
                    "measured_df": (None if est is None or math.isinf(est.df) else est.df),
                    **_vs_published(row, code, mean, se, est),
                    "vs_zero_shot": _vs_zero_shot(by_seed, baseline) if baseline is not None else None,
                    **_tuned_fields(row, code, special),
                    "n_per_seed": sizes,
                    "n_distinct": distinct,
                    "failed": sum(sum(r["failed"]) for r in by_seed.values()),
                    "calls": sum(r["calls"] for r in by_seed.values()),
                    **_spend(row, by_seed, sum(sizes))})
    # Holm within each family of tests the table makes
    for cell_row, adjusted in zip(out, holm([r["p_vs_published"] for r in out]), strict=True):
        cell_row["p_vs_published_holm"] = adjusted
    zero = [r["vs_zero_shot"] for r in out if r["vs_zero_shot"] is not None]
    for comparison, value in zip(zero, holm([z["p"] for z in zero]), strict=True):
        comparison["p_holm"] = value
    return out


def _spend(row: str, by_seed: Mapping[int, Mapping[str, Any]], n: int) -> dict[str, Any]:
    """A cell's billable tokens per question (the adaptive row: and the share its team answered)."""
    spend: dict[str, Any] = {"tokens_per_question": round(sum(r["tokens"] for r in by_seed.values()) / max(1, n), 1)}
    if ROWS_001[row][1] == "adaptive":
        spend["escalation_rate"] = round(sum(r["escalated"] for r in by_seed.values()) / max(1, n), 4)
    return spend


def _vs_published(row: str, code: str, mean: float, se: float, est: Any) -> dict[str, Any]:
    """The published figure of a cell, whether it is possible, and the Welch test against it (when it
    is, and the cell is large enough for its SE)."""
    from teammed.evals.stats import mde_t, published_consistency, welch_t_test

    pub_mean, pub_se = TABLE1_001.get(ROWS_001[row][0], {}).get(code, (None, None))
    check = (published_consistency(pub_mean, pub_se, n=PAPER_N, k=PAPER_SEEDS)
             if pub_mean is not None and pub_se is not None else None)
    diff = mean - pub_mean if pub_mean is not None else None
    possible = bool(check is not None and check.consistent)  # never tested against an impossible cell
    refused = _too_small(est, pub_mean) if possible else None  # nor on too few questions for its SE
    welch = (welch_t_test(mean - pub_mean, se, est.df, pub_se or 0.0, PAPER_SEEDS - 1)
             if possible and est is not None and refused is None and pub_mean is not None else None)
    return {"published": pub_mean, "published_se": pub_se,
            "published_consistent": check.consistent if check is not None else None,
            "published_check": check._asdict() if check is not None else None,
            "difference": round(diff, 2) if diff is not None else None,
            "p_vs_published": welch[0] if welch is not None else None,
            "test_refused": refused,
            "df_vs_published": round(welch[1], 2) if welch is not None and not math.isinf(welch[1]) else None,
            "mde_vs_published": (round(mde_t(math.hypot(se, pub_se or 0.0), welch[1]), 1)
                                 if welch is not None else None)}


def _too_small(est: Any, pub_mean: float | None) -> str | None:
    """Why the binomial SE cannot test this cell (a normal approximation on a handful of questions)."""
    if est is None or pub_mean is None or est.source != "binomial" \
            or min(est.n * pub_mean / 100, est.n * (1 - pub_mean / 100)) >= MIN_EXPECTED:
        return None
    return (f"too few questions ({est.n}) for a test with the binomial SE against {pub_mean:.1f}%: "
            f"at least {MIN_EXPECTED} expected right and wrong answers are needed")


def _by_question(by_seed: Mapping[int, Mapping[str, Any]]) -> dict[tuple[str, str], bool]:
    return {(str(s), str(i)): bool(c) for s, r in by_seed.items() for i, c in zip(r["ids"], r["correct"], strict=True)}


def _vs_zero_shot(by_seed: Mapping[int, Mapping[str, Any]],
                  baseline: Mapping[int, Mapping[str, Any]]) -> dict[str, Any] | None:
    """Exact McNemar against the Zero-Shot cell of the same data set, each question once
    (`teammed.evals.stats.pair_once`), with its minimum detectable effect."""
    from teammed.evals.stats import discordant, mcnemar, mde_paired, pair_once

    pairing = pair_once(_by_question(by_seed), _by_question(baseline))
    if not pairing.n:
        return None
    b, c = discordant(pairing.pairs)
    mde = mde_paired(pairing.n, (b + c) / pairing.n)
    return {"b": b, "c": c, "n": pairing.n, "repeats": pairing.repeats, "p": round(mcnemar(b, c), 6),
            "mde": round(100 * mde, 1) if mde is not None else None}


def _tuned_fields(row: str, code: str, special: Mapping[str, Mapping[str, Any]] | None) -> dict[str, Any]:
    """The tuned row: whether tune's held-out proof ran (a Special Set the budget left unproven is
    marked), and the hash of the data it was tuned on."""
    if ROWS_001[row][1] != "special":
        return {}
    found = (special or {}).get(code, {})
    return {"proof": "run" if found.get("proven") else "not run", "dataset_sha256": found.get("dataset_sha256")}


def _notes(table: Sequence[Mapping[str, Any]], unavailable: Mapping[str, str], inconsistent: int) -> list[str]:
    """What the table's reader needs under it: untested cells, impossible published cells, an unproven
    tuned row, missing data sets, the adaptive row's spend, the MDAgents variant."""
    lines: list[str] = []
    refused = [f"- {r['row']} on {r['dataset']}: {r['test_refused']}" for r in table if r.get("test_refused")]
    if refused:
        lines += ["", "Not tested against the paper (p n/a):", *refused]
    if inconsistent:
        lines += ["", f"{inconsistent} published cell(s) cannot come from {PAPER_SEEDS} seeds x {PAPER_N} questions "
                  "(mean not a multiple of 100/150, or no three accuracies with that mean give the SE); they are "
                  "shown but never tested (p n/a). 'SD' marks an SE that fits only when read as a standard "
                  "deviation."]
    unproven = [r["dataset"] for r in table if r.get("proof") == "not run"]
    if unproven:
        lines += ["", f"The tuned row's held-out proof did not run for {', '.join(unproven)} (the tune budget did not "
                  "cover it): that Special Set is unproven; raise --tune-budget to prove it."]
    if unavailable:
        lines += ["", "not run (not available locally):"] + [f"- {c}: {why}" for c, why in unavailable.items()]
    adaptive = [r for r in table if "escalation_rate" in r]
    if adaptive:
        tuned = {r["dataset"]: r for r in table if r["row"] == "TeamMed (tuned)"}
        lines += ["", "TeamMed (adaptive): the single agent, escalating to the tuned Special Set below the threshold "
                  "chosen on tuning questions (within 1 point of it at 90% confidence, else always):"]
        for r in adaptive:
            beside = tuned.get(r["dataset"])
            lines.append(f"- {r['dataset']}: {r['tokens_per_question']:,.0f} tokens/question, "
                         f"{100 * r['escalation_rate']:.0f}% escalated"
                         + (f"; the Special Set {beside['tokens_per_question']:,.0f}" if beside else ""))
    if any(r["row"] == "MDAgents" for r in table):
        variant, summary = _mdagents_variant()
        lines += ["", f"MDAgents: our MDAgents-style system (`mdagents`), {variant} variant: {summary}."]
    return lines


def _fmt_p(p: float | None) -> str:
    return "n/a" if p is None else f"{p:.3f}"


def _markdown(table: Sequence[Mapping[str, Any]], unavailable: Mapping[str, str], s: ReproduceSettings) -> str:
    n_tests = sum(r["p_vs_published"] is not None for r in table)
    inconsistent = sum(r["published_consistent"] is False for r in table)
    server = f" at {s.server}" if s.server else ""
    lines = [f"# 001 Table 1 reproduced with {s.model}{server} (seeds {', '.join(map(str, s.seeds))}, n={s.n} per "
             f"seed)", "",
             "measured mean ± SE: the SE over seeds (t, k-1 df), or the binomial SE of the cell's questions "
             "when larger (marked b: one seed, or seeds that agree) | published mean ± SE and whether the "
             f"paper's protocol ({PAPER_SEEDS} seeds x {PAPER_N} questions) can produce it | difference | "
             f"test: two-sided Welch t-test of measured vs published (published SE on {PAPER_SEEDS - 1} df, "
             "Satterthwaite df), p raw and "
             f"Holm-adjusted over the table's {n_tests} tests | MDE: the smallest true difference (points) "
             "detectable at 80% power, alpha 0.05, with these SEs and df or pairs | exact McNemar vs Zero-Shot on "
             "the same questions, each question once at the first seed both drew it (b/c, p, Holm p, MDE; "
             "answers of repeated questions left out are counted in `table1.json`)", "",
             "| row | data set | measured | published | possible | difference | p | Holm p | MDE | "
             "vs Zero-Shot (b/c, p, Holm p, MDE) | failed |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in table:
        z = r["vs_zero_shot"]
        vs = (f"{z['b']}/{z['c']}, p={z['p']:.3f}, Holm {z['p_holm']:.3f}, MDE {z['mde']:.1f}" if z else "")
        pub = f"{r['published']:.1f} ± {r['published_se']:.1f}" if r["published"] is not None else "not in paper"
        possible = _possible(r["published_check"])
        diff = f"{r['difference']:+.1f}" if r["difference"] is not None else ""
        mde = f"{r['mde_vs_published']:.1f}" if r["mde_vs_published"] is not None else ""
        floor = " b" if r.get("measured_se_source") == "binomial" else ""
        name = r["row"] + (" (held-out proof not run)" if r.get("proof") == "not run" else "")
        name += f" ({_mdagents_variant()[0]} variant)" if r["row"] == "MDAgents" else ""
        lines.append(f"| {name} | {r['dataset']} | {r['measured']:.1f} ± {r['measured_se']:.1f}{floor} | {pub} | "
                     f"{possible} | {diff} | {_fmt_p(r['p_vs_published'])} | {_fmt_p(r.get('p_vs_published_holm'))} | "
                     f"{mde} | {vs} | {r['failed']} |")
    lines += _notes(table, unavailable, inconsistent)
    return "\n".join(lines) + "\n"


def _mdagents_variant() -> tuple[str, str]:
    """The variant of the MDAgents row (`_program_for` builds the system's defaults) and what it is."""
    from teammed.programs.peers.mdagents import DEFAULT_VARIANT, VARIANT_SUMMARY

    return DEFAULT_VARIANT, VARIANT_SUMMARY[DEFAULT_VARIANT]


def _possible(check: Mapping[str, bool] | None) -> str:
    if check is None:
        return ""
    if not check["mean_possible"]:
        return "no (mean)"
    if not check["se_possible"]:
        return "no (SE; SD fits)" if check["sd_possible"] else "no (SE)"
    return "yes"


def load_paper_datasets(codes: Sequence[str], *, data_dir: Path | None,
                        split: str | None = None) -> dict[str, Sequence[Question] | str]:
    """Each code's questions (a code, a registry name or a file), or the reason it cannot be loaded."""
    from teammed.data import load_dataset
    from teammed.records import dataset_digest

    found: dict[str, Sequence[Question] | str] = {}
    for code in codes:
        name = DATASETS_001.get(code.upper(), code)
        path = Path(code)
        # a paper code, else a file's stem (with its content hash when two files share a stem)
        label = code.upper() if code.upper() in DATASETS_001 else (path.stem if path.suffix else code)
        try:
            questions: Sequence[Question] | str = load_dataset(name, data_dir=data_dir, split=split)
        except (TeammedError, OSError) as exc:
            questions = f"{type(exc).__name__}: {exc}"
        if label in found:
            label = f"{label}-{dataset_digest(questions)[:8]}" if not isinstance(questions, str) else code
        found[label] = questions
    return found

