"""`reproduce medagentsbench`: MedAgentsBench's hard-set table, published rows from its files, measured rows ours.

What the table holds and how its rows are tested: docs/commands/reproduce.md. Every cell (data set x row) is
one trial of one study (`tune_queue.WorkQueue`), so the command resumes; a study made for another model, split
or question count is refused.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dspy

from teammed.errors import ConfigError
from teammed.optimizers._scoring import cell_result, score_questions
from teammed.optimizers.tune_queue import WorkQueue
from teammed.records import write_atomic
from teammed.types import Question

__all__ = ["PROTOCOL", "ROWS_MAB", "DEFAULT_ROWS_MAB", "MabSettings", "MabResult", "reproduce_medagentsbench",
           "row_program_mab", "pool_without"]

PROTOCOL = "medagentsbench"

# row -> (teammed system or preset, the published method it corresponds to (None: none), how closely)
ROWS_MAB: dict[str, tuple[str, str | None, str]] = {
    "Zero-Shot": ("system:zero_shot", "zero_shot", "close: one call, a letter; the prompts differ"),
    "Few-Shot": ("system:few_shot", "few_shot", "loose: worked examples drawn from the pool split"),
    "CoT": ("system:cot", "cot", "close: reasoning, then a letter"),
    "Majority vote (5)": ("system:majority_vote", "cot_sc-5",
                          "loose: five independent generic experts by plurality, not five samples of one chain"),
    "MDAgents": ("system:mdagents", "mdagents", "a reimplementation (docs/fidelity.md lists its departures)"),
    "All Compon.": ("preset:all5", None, "none: TeamMedAgents' five components, not published by MedAgentsBench"),
}
DEFAULT_ROWS_MAB = ("Zero-Shot", "Few-Shot", "CoT", "MDAgents")


@dataclass(frozen=True)
class MabSettings:
    model: str
    published_model: str
    server: str = ""  # where the measured answers come from besides the model's name
    split: str = "test_hard"
    n: int | None = None  # None: every question of the split
    rows: tuple[str, ...] = DEFAULT_ROWS_MAB


@dataclass
class MabResult:
    rows: list[dict[str, Any]]
    tests: list[dict[str, Any]]
    unavailable: dict[str, str]
    markdown: str = ""
    paths: dict[str, Path] = field(default_factory=dict)


def check_rows(rows: Sequence[str]) -> None:
    unknown = [r for r in rows if r not in ROWS_MAB]
    if unknown:
        raise ConfigError(f"unknown {PROTOCOL} rows {unknown}; choose from {', '.join(ROWS_MAB)}")


def pool_without(pool: Sequence[Question], table: Sequence[Question]) -> list[Question]:
    """The labelled pool questions that are not questions of the table (by id or by text)."""
    from teammed.data.published import text_key

    ids, texts = {q.id for q in table}, {text_key(q.question) for q in table}
    return [q for q in pool if q.answer_idx and q.id not in ids and text_key(q.question) not in texts]


def row_program_mab(row: str, pool: Sequence[Question], seed: int = 0) -> dspy.Module:
    """The program of a row; Few-Shot and MDAgents take their worked examples from ``pool``."""
    from teammed.config import preset
    from teammed.programs.peers import build_with_examples
    from teammed.programs.teamwork import TeamworkProgram
    from teammed.systems import takes_examples

    kind, _, what = ROWS_MAB[row][0].partition(":")
    if kind == "preset":
        return TeamworkProgram(preset(what))
    if takes_examples(what) and not pool:
        raise ConfigError(f"{row} needs worked examples, and the pool split has no labelled question outside the "
                          f"table; give --pool-split, or leave the row out with --rows")
    return build_with_examples(what, pool, seed=seed, **({"n_experts": 5} if what == "majority_vote" else {}))


def _published(root: Path, code: str, questions: Sequence[Question], settings: MabSettings) -> list[Any]:
    from teammed.data.published import published_files, read_all, text_key
    from teammed.evals.published import folder_of

    paths = published_files(Path(root) / folder_of(code), model=settings.published_model, split=settings.split)
    return read_all(paths, known={text_key(q.question): q.id for q in questions})


def reproduce_medagentsbench(*, datasets: Mapping[str, Sequence[Question] | str], pools: Mapping[str, list[Question]],
                             lm: dspy.BaseLM, settings: MabSettings, published_root: Path, storage: str | None,
                             study_name: str, out_dir: Path) -> MabResult:
    """Run (or resume) the table's cells and write ``table.md`` and ``table.json`` in ``out_dir``."""
    from teammed.data.sampling import sample_questions

    check_rows(settings.rows)
    unavailable = {code: q for code, q in datasets.items() if isinstance(q, str)}
    table = {code: sample_questions(list(q), n=settings.n, seed=0) for code, q in datasets.items()
             if not isinstance(q, str)}
    if not table:
        raise ConfigError("none of the data sets is available locally; give --data-dir or --datasets")
    published = {code: _published(published_root, code, qs, settings) for code, qs in table.items()}
    from teammed.optimizers.reproduce import open_protocol_study

    study = open_protocol_study(storage, study_name, out_dir, {
        "protocol": PROTOCOL, "model": settings.model, "server": settings.server, "split": settings.split,
        "n": settings.n})
    by_code = {code: {q.id: q for q in qs} for code, qs in table.items()}

    def execute(cell: dict[str, Any]) -> dict[str, Any]:
        program = row_program_mab(cell["row"], pools.get(cell["dataset"], []))
        return cell_result(score_questions(program, list(by_code[cell["dataset"]].values()), lm))

    cells: list[dict[str, Any]] = [{"kind": PROTOCOL, "dataset": code, "row": row, "split": settings.split,
                                    "n": len(qs)} for code, qs in table.items() for row in settings.rows]
    for code in table:  # refuse a row without its pool before any call
        for row in settings.rows:
            row_program_mab(row, pools.get(code, []))
    done = WorkQueue(study).run(cells, execute)
    rows, tests = _rows_and_tests(cells, done, published)
    result = MabResult(rows, tests, unavailable, _markdown(rows, tests, unavailable, settings))
    result.paths = {"md": write_atomic(out_dir / "table.md", result.markdown),
                    "json": write_atomic(out_dir / "table.json", json.dumps(
                        {"rows": rows, "tests": tests, "unavailable": unavailable, "settings": settings.__dict__},
                        indent=2, default=str) + "\n")}
    return result


def _rows_and_tests(cells: Sequence[Mapping[str, Any]], done: Mapping[str, Mapping[str, Any]],
                    published: Mapping[str, list[Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    from teammed.evals.stats import by_question, discordant, holm, mcnemar, pair_once
    from teammed.optimizers.tune_queue import cell_key

    rows: list[dict[str, Any]] = []
    tests: list[dict[str, Any]] = []
    for code, runs in published.items():
        ids = {i for cell in cells if cell["dataset"] == code for i in done[cell_key(cell)]["ids"]}
        for run in runs:
            s = run.summary(ids)
            rows.append({"dataset": code, "row": run.method, "source": f"published ({run.model})", "n": s.n,
                         "accuracy": s.accuracy, "tokens_per_question": s.tokens_per_question,
                         "usd_per_question": None, "seconds_per_question": s.seconds_per_question,
                         "notes": run.notes()})
        for cell in (c for c in cells if c["dataset"] == code):
            r = done[cell_key(cell)]
            n = len(r["ids"])
            ours = dict(zip(r["ids"], r["correct"], strict=True))
            rows.append({"dataset": code, "row": cell["row"], "source": "measured", "n": n, "n_per_seed": [n],
                         "accuracy": sum(r["correct"]) / n if n else None,
                         "tokens_per_question": r["tokens"] / n if n else None,
                         "usd_per_question": r["cost_usd"] / n if n else None, "calls_per_question": r["calls"] / n,
                         "failed": sum(r["failed"]), "corresponds_to": ROWS_MAB[cell["row"]][1],
                         "correspondence": ROWS_MAB[cell["row"]][2], "seconds_per_question": None, "notes": []})
            for run in runs:
                pairing = pair_once(by_question(ours), by_question({x.id: x.correct for x in run.rows}))
                b, c = discordant(pairing.pairs)
                tests.append({"dataset": code, "row": cell["row"], "published": run.method, "n": pairing.n, "b": b,
                              "c": c, "p": mcnemar(b, c) if pairing.n else None,
                              "mapped": ROWS_MAB[cell["row"]][1] == run.method})
    for test, adjusted in zip(tests, holm([t["p"] for t in tests]), strict=True):
        test["p_holm"] = adjusted
    return rows, tests


def _fmt(value: float | None, spec: str, scale: float = 1.0, missing: str = "not reported") -> str:
    return missing if value is None else format(value * scale, spec)


def _markdown(rows: Sequence[Mapping[str, Any]], tests: Sequence[Mapping[str, Any]], unavailable: Mapping[str, str],
              s: MabSettings) -> str:
    from teammed.evals._tables import markdown_table

    lines = [f"# MedAgentsBench {s.split}: published ({s.published_model}) and measured ({s.model}"
             + (f" at {s.server}" if s.server else "") + ")", "",
             "Published rows: MedAgentsBench's files, scored as published (the gold letter exactly) on the questions "
             "measured here; tokens are the provider's billed prompt + completion tokens per question (*not "
             "reported*: unknown, not zero). Measured rows: teammed's systems on the same questions; tokens billable; "
             "$ at the backend's price where litellm knows it. Tests: exact two-sided McNemar of each measured row "
             "against each published row, each question once, Holm over all "
             f"{len(tests)} tests; *mapped* marks the published method the row corresponds to.", ""]
    for code in dict.fromkeys(r["dataset"] for r in rows):
        body = [[r["row"], r["source"], str(r["n"]), _fmt(r["accuracy"], ".1f", 100), _fmt(r["tokens_per_question"],
                 ",.0f"), _fmt(r["usd_per_question"], ".4f", missing="—"),
                 r.get("corresponds_to") or "" if r["source"] == "measured" else "; ".join(r["notes"])]
                for r in rows if r["dataset"] == code]
        lines += [f"## {code}", "", markdown_table(["Row", "Source", "n", "Accuracy (%)", "Tokens / question",
                                                   "$ / question", "Corresponds to / notes"], body), ""]
        body = [[t["row"], t["published"] + (" (mapped)" if t["mapped"] else ""), str(t["n"]), str(t["b"]),
                 str(t["c"]), _fmt(t["p"], ".4f", missing="n/a"), _fmt(t["p_holm"], ".4f", missing="n/a")]
                for t in tests if t["dataset"] == code]
        lines += ["Measured against published, question by question (b: only the measured row right, c: only "
                  "the published one):", "",
                  markdown_table(["Measured", "Published", "Pairs", "b", "c", "McNemar p", "Holm p"], body), ""]
    lines += [f"- {code}: {why}" for code, why in unavailable.items()]
    return "\n".join(lines) + "\n"
