"""Published methods beside your runs: MedAgentsBench's per-question outputs on the questions your runs answered.

`published_beside` gives, per data set of the report, the rows of docs/published.md ("What each figure is"):
each published method of one model on the questions your runs answered that it answered, your configurations
on the same questions, and an exact McNemar test of each pair, each question once
(`teammed.evals.stats.pair_once`), Holm over the whole family. Questions are matched by text where the runs'
rows hold it, else by the files' ``realidx`` (`teammed.data.published.read_all`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from teammed.data.published import PublishedRun, parse_name, published_files, read_all, text_key
from teammed.errors import TeammedError
from teammed.evals._runs import Group
from teammed.evals.stats import Pairing, discordant, holm, mcnemar, outcomes_of, pair_once

__all__ = ["published_beside", "published_markdown", "PublishedError", "folder_of", "compare_with_published",
           "compare_published_markdown"]

logger = logging.getLogger(__name__)


class PublishedError(TeammedError, ValueError):
    """Published outputs that cannot be set beside these runs (names what is missing and the fix)."""


def folder_of(dataset: str) -> str:
    """MedAgentsBench's folder of a teammed data set name (``mmlu_pro_health`` -> ``mmlu-pro``)."""
    from teammed.data.medagentsbench import FOLDERS

    base = dataset.split("@", 1)[0].split(":", 1)[0]
    return FOLDERS.get(base, base)


def _pick_model(root: Path, folder: str, model: str | None, run_models: Sequence[str]) -> str:
    held = sorted({parse_name(p)[0] for p in (root / folder).glob("*.json")}) if (root / folder).is_dir() else []
    if not held:
        raise PublishedError(f"{root / folder}: no published outputs for this data set; pass MedAgentsBench's "
                             f"output/ folder (it holds one folder per data set)")
    if model is not None:
        if model not in held:
            raise PublishedError(f"{root / folder} holds no outputs of model {model!r}; it holds {', '.join(held)}")
        return model
    named = [m.rsplit("/", 1)[-1] for m in run_models]
    matches = [m for m in held if m in named]
    if len(matches) == 1:
        return matches[0]
    if len(held) == 1:
        return held[0]
    raise PublishedError(f"{root / folder} holds outputs of {len(held)} models ({', '.join(held)}); pick one "
                         f"with --model")


def _read(groups: Sequence[Group], paths: Sequence[Path]) -> list[PublishedRun]:
    """The published files, their questions matched to the runs' own question texts first (`read_all`)."""
    ids = {row.id for g in groups for row in g.rows}
    known = {text_key(row.question): row.id for g in groups for run in g.runs for row in run.rows_of(ids)
             if row.question}
    return read_all(paths, known=known)


def _run_models(groups: Sequence[Group]) -> list[str]:
    return [r.identity.model for g in groups for r in g.runs if r.identity is not None and r.identity.model]


def _split_of(groups: Sequence[Group]) -> str | None:
    splits = {run.identity.split for g in groups for run in g.runs if run.identity is not None and run.identity.split}
    return splits.pop() if len(splits) == 1 else None


def _ours_on(group: Group, ids: set[str]) -> dict[str, Any]:
    rows = [r for r in group.rows if r.labeled and r.id in ids]
    tokens = [r.recorded.get("prompt_tokens", 0.0) + r.recorded.get("completion_tokens", 0.0) for r in rows]
    seconds = [r.recorded["latency_s"] for r in rows if "latency_s" in r.recorded]
    right = sum(bool(r.correct) and not r.failed for r in rows)
    return {"config": group.config, "answers": len(rows), "questions": len({r.id for r in rows}),
            "accuracy": right / len(rows) if rows else None,
            "tokens_per_question": sum(tokens) / len(tokens) if tokens else None,
            "seconds_per_question": sum(seconds) / len(seconds) if seconds else None}


def _pairing(group: Group, run: PublishedRun) -> Pairing:
    """``group`` against ``run`` by `pair_once`: the method answered each question once, so its answer stands at
    every seed, and the pair is taken at the first seed of ours that drew the question."""
    ours = outcomes_of(group.rows)
    seeds = sorted({seed for seed, _ in ours})
    return pair_once(ours, {(seed, row.id): row.correct for row in run.rows for seed in seeds})


def _paired(group: Group, run: PublishedRun) -> dict[str, Any] | None:
    pairing = _pairing(group, run)
    if not pairing.n:
        return None
    b, c = discordant(pairing.pairs)
    return {"config": group.config, "method": run.method, "n": pairing.n, "b": b, "c": c, "p": mcnemar(b, c),
            "repeats": pairing.repeats,
            "diff": (sum(a for a, _ in pairing.pairs) - sum(t for _, t in pairing.pairs)) / pairing.n}


def published_beside(groups: Sequence[Group], root: Path, *, model: str | None = None,
                     split: str | None = None) -> dict[str, Any]:
    """The published methods of ``model`` beside ``groups`` (see the module docstring), per data set."""
    root = Path(root).expanduser()
    if not root.is_dir():
        raise PublishedError(f"--published {root}: not a folder; pass MedAgentsBench's output/ folder")
    out: dict[str, Any] = {"root": str(root), "datasets": {}}
    family: list[dict[str, Any]] = []
    for dataset in dict.fromkeys(g.dataset for g in groups):
        mine = [g for g in groups if g.dataset == dataset]
        folder = folder_of(dataset)
        chosen = _pick_model(root, folder, model, _run_models(mine))
        want_split = split or _split_of(mine)
        paths = published_files(root / folder, model=chosen, split=want_split)
        splits = sorted({parse_name(p)[2] for p in paths})
        if len(splits) > 1:
            raise PublishedError(f"{root / folder}: {chosen} has outputs for splits {', '.join(splits)}; pick one "
                                 f"with --published-split")
        runs = _read(mine, paths)
        ids = {row.id for g in mine for row in g.rows if row.labeled}
        methods = []
        for run in runs:
            shown = run.summary(ids)
            if not shown.n:
                logger.warning("%s shares no question with the runs on %s; left out", run.path, dataset)
                continue
            methods.append({**shown.model_dump(), "path": run.path, "notes": run.notes()})
            for group in mine:
                if (test := _paired(group, run)) is not None:
                    test["dataset"] = dataset
                    family.append(test)
        answered = {row.id for r in runs for row in r.restricted(ids)}
        out["datasets"][dataset] = {"folder": folder, "model": chosen, "split": splits[0] if splits else want_split,
                                    "methods": methods, "ours": [_ours_on(g, answered) for g in mine],
                                    "questions": len(answered), "unmatched": len(ids - answered)}
    for test, adjusted in zip(family, holm([t["p"] for t in family]), strict=True):
        test["p_holm"] = adjusted
    out["tests"] = family
    return out


def _fmt(value: float | None, spec: str, scale: float = 1.0) -> str:
    return "not reported" if value is None else format(value * scale, spec)


def published_markdown(numbers: Mapping[str, Any]) -> list[str]:
    """The report's section: per data set the published methods and your configurations on the same
    questions, then the paired tests (Holm over the family)."""
    from teammed.evals._tables import markdown_table

    lines = ["## Published methods beside these runs", "",
             f"From `{numbers['root']}` (MedAgentsBench's per-question outputs). Each published method is scored on "
             "the questions these runs answered that it answered, as published (its answer must be the gold letter; "
             "anything else counts wrong); tokens are the provider's billed prompt + completion tokens per question "
             "(*not reported* where the file has none: unknown, not zero). Your configurations' figures are over "
             "every seed's answers to the same questions, their tokens billable.", ""]
    for dataset, d in numbers["datasets"].items():
        body = [[m["method"], f"{m['model']} (published)", str(m["n"]), _fmt(m["accuracy"], ".1f", 100),
                 _fmt(m["tokens_per_question"], ",.0f"), _fmt(m["seconds_per_question"], ".1f"),
                 "; ".join(m["notes"]) or ""] for m in d["methods"]]
        body += [[o["config"], "this report", f"{o['questions']} ({o['answers']} answers)",
                  _fmt(o["accuracy"], ".1f", 100), _fmt(o["tokens_per_question"], ",.0f"),
                  _fmt(o["seconds_per_question"], ".1f"), ""] for o in d["ours"]]
        lines += [f"### {dataset} ({d['split']}, model {d['model']}): {d['questions']} questions"
                  + (f"; {d['unmatched']} answered by these runs have no published answer" if d["unmatched"] else ""),
                  "", markdown_table(["Method", "Source", "n", "Accuracy (%)", "Tokens / question", "s / question",
                                      "Notes"], body), ""]
    tests = numbers.get("tests") or []
    if tests:
        body = [[t["config"], t["method"], t["dataset"], f"{100 * t['diff']:+.1f}", str(t["n"]), str(t["b"]),
                 str(t["c"]), f"{t['p']:.4f}", f"{t['p_holm']:.4f}"] for t in tests]
        lines += ["### Paired tests against the published methods", "",
                  "Exact two-sided McNemar on the questions both answered, each question once (at the first seed "
                  "of yours that drew it); b: only your configuration right, c: only the published method right; "
                  f"Holm over all {len(tests)} tests of this section.", "",
                  markdown_table(["Config", "Published method", "Data set", "Δ acc (pp)", "Pairs", "b", "c",
                                  "McNemar p", "Holm p"], body), ""]
    return lines


def compare_with_published(groups: Sequence[Group], target: str, *, root: Path | None, model: str | None = None,
                           split: str | None = None) -> dict[str, Any]:
    """``report RUNS --compare METHOD_OR_FILE``: the runs' one configuration against one published method, question
    by question (each question once: `pair_once`), with the exact McNemar test. ``target`` is a published file,
    or a method name looked up under ``root`` (``--published``) for ``model``."""
    if len(groups) != 1:
        found = ", ".join(f"{g.config} on {g.dataset}" for g in groups)
        raise PublishedError(f"--compare {target} sets one configuration against a published method; these runs hold "
                             f"{len(groups)} ({found}): pass the run directories of one")
    [group] = groups
    path = Path(target).expanduser()
    if not path.is_file():
        if root is None:
            raise PublishedError(f"--compare {target}: not a file; to name a published method, give --published DIR "
                                 f"(MedAgentsBench's output/ folder) too")
        folder = folder_of(group.dataset)
        chosen = _pick_model(Path(root).expanduser(), folder, model, _run_models([group]))
        paths = published_files(Path(root).expanduser() / folder, model=chosen, split=split or _split_of([group]),
                                method=target)
        if len(paths) > 1:
            raise PublishedError(f"--compare {target}: {len(paths)} files match ({', '.join(map(str, paths))}); give "
                                 f"--published-split or the file itself")
        path = paths[0]
    [run] = _read([group], [path])
    pairing = _pairing(group, run)
    fixed = [k[1] for k, (a, b) in zip(pairing.keys, pairing.pairs, strict=True) if a and not b]
    broken = [k[1] for k, (a, b) in zip(pairing.keys, pairing.pairs, strict=True) if b and not a]
    both = sum(a and b for a, b in pairing.pairs)
    return {"dataset": group.dataset, "config": group.config, "published": run.method, "model": run.model,
            "path": run.path, "n": pairing.n, "both_right": both, "fixed": len(fixed), "broken": len(broken),
            "both_wrong": pairing.n - both - len(fixed) - len(broken), "repeats": pairing.repeats,
            "unpaired": pairing.unpaired, "p_mcnemar": mcnemar(len(fixed), len(broken)),
            "fixed_ids": fixed, "broken_ids": broken, "notes": run.notes()}


def compare_published_markdown(view: Mapping[str, Any]) -> list[str]:
    """The report's section for `compare_with_published`: the 2x2 table and McNemar."""
    mine, theirs = f"`{view['config']}`", f"`{view['published']}` ({view['model']}, published)"
    said = f" ({view['repeats']} answers of questions another seed also drew are left out)" if view["repeats"] else ""
    return [f"## Paired comparison on {view['dataset']}: {mine} against {theirs}", "",
            f"On the {view['n']} questions both answered{said}: **fixed {view['fixed']}** (only {mine} right) and "
            f"**broken {view['broken']}** (only the published method right); exact McNemar p = "
            f"{view['p_mcnemar']:.3f}. The published answers are scored as published; "
            + ("; ".join(view["notes"]) or "the file has no quirk to note") + ".", "",
            f"| | {mine} right | {mine} wrong |", "|---|---|---|",
            f"| published right | both right: {view['both_right']} | broken: {view['broken']} |",
            f"| published wrong | fixed: {view['fixed']} | both wrong: {view['both_wrong']} |", "",
            f"Fixed: {', '.join(view['fixed_ids']) or 'none'}. Broken: {', '.join(view['broken_ids']) or 'none'}.", ""]
