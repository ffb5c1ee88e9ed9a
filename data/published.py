"""Published per-question outputs of other systems: MedAgentsBench's ``output/`` folder, typed.

``output/<dataset>/<model>-<dataset>-<split>-<method>.json`` is a JSON list of objects with ``realidx``,
``question``, ``answer_idx`` (gold), ``predicted_answer``, ``token_usage`` (the provider's billed
``prompt_tokens``/``completion_tokens``) and ``time_elapsed`` (seconds). `read_published` turns one file
into a `PublishedRun`, by the rules of docs/published.md ("What the files do not say, and how teammed reads
them"), each said in its ``notes``: questions matched by text (`reference_of`, `read_all`); a repeat counted
once; tokens a file never reports unknown, not zero; a prediction that is no option letter wrong, never made
a letter; a file that is not such a list refused with `PublishedFormatError` naming the file and the row.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from teammed.errors import TeammedError

__all__ = ["PublishedRow", "PublishedRun", "PublishedSummary", "PublishedFormatError", "read_published", "read_all",
           "published_files", "reference_of", "text_key", "parse_name", "cot_answer_tokens"]

_REQUIRED = ("question", "answer_idx", "predicted_answer")


class PublishedFormatError(TeammedError, ValueError):
    """A published output file that cannot be read as one (names the file and what is wrong)."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class PublishedRow(_Frozen):
    """One question as a published method answered it."""

    id: str  # the benchmark's id (matched by text where a reference was given)
    realidx: str | None  # the id the file gave it
    question: str
    gold: str
    prediction: str | None  # as published (None: NaN or absent)
    correct: bool
    prompt_tokens: int | None  # None: the file reports no tokens
    completion_tokens: int | None
    seconds: float | None
    route: str | None = None  # MDAgents' ``difficulty``: the route it took


class PublishedSummary(_Frozen):
    """A published method on a set of questions: accuracy and billed cost per question (None: not reported)."""

    method: str
    model: str
    n: int
    correct: int
    accuracy: float | None
    tokens_per_question: float | None
    seconds_per_question: float | None


class PublishedRun(_Frozen):
    """One published file: who answered (model, method), on what (data set, split), and the rows."""

    path: str
    model: str
    dataset: str
    split: str
    method: str
    rows: tuple[PublishedRow, ...]
    duplicates: int  # repeated questions dropped (the first kept)
    renumbered: int  # rows whose text matched another id than their realidx
    unscored: int  # predictions that are not an option letter (counted wrong)
    tokens_reported: bool
    seconds_reported: bool

    @property
    def n(self) -> int:
        return len(self.rows)

    def restricted(self, ids: Iterable[str]) -> list[PublishedRow]:
        wanted = set(ids)
        return [row for row in self.rows if row.id in wanted]

    def summary(self, ids: Iterable[str] | None = None) -> PublishedSummary:
        """Accuracy, billed tokens and seconds per question over ``ids`` (default: every question)."""
        rows = list(self.rows) if ids is None else self.restricted(ids)
        n = len(rows)
        tokens = ([r.prompt_tokens + r.completion_tokens for r in rows if r.prompt_tokens is not None
                   and r.completion_tokens is not None] if self.tokens_reported else [])
        seconds = [r.seconds for r in rows if r.seconds is not None]
        return PublishedSummary(method=self.method, model=self.model, n=n, correct=sum(r.correct for r in rows),
                                accuracy=sum(r.correct for r in rows) / n if n else None,
                                tokens_per_question=sum(tokens) / len(tokens) if tokens else None,
                                seconds_per_question=sum(seconds) / len(seconds) if seconds else None)

    def notes(self) -> list[str]:
        return [note for said, note in (
            (self.duplicates, f"the file repeats {self.duplicates} question(s): dropped, the first row kept"),
            (self.renumbered, f"{self.renumbered} of the file's rows matched by question text to another id than "
                              f"their realidx"),
            (self.unscored, f"{self.unscored} of the file's predictions not an option letter, counted wrong as "
                            f"published"),
            (not self.tokens_reported, "the file reports no token usage: tokens unknown, not zero"),
            (not self.seconds_reported, "the file reports no time")) if said]


def text_key(question: str) -> str:
    """A question's text for matching: lower case, runs of white space as one space, and no trailing
    punctuation or white space (one method appends " ?" to some questions)."""
    return re.sub(r"[\W_]+$", "", re.sub(r"\s+", " ", question).strip().lower())


def parse_name(path: Path) -> tuple[str, str, str, str]:
    """``(model, dataset, split, method)`` of ``<model>-<dataset>-<split>-<method>.json`` in ``<dataset>/``."""
    dataset, stem = path.parent.name, path.stem
    marker = f"-{dataset}-"
    at = stem.rfind(marker)
    rest = stem[at + len(marker):] if at > 0 else ""
    split, _, method = rest.partition("-")
    if at <= 0 or not split or not method:
        raise PublishedFormatError(f"{path}: the name is not <model>-{dataset}-<split>-<method>.json, the layout of "
                                   f"MedAgentsBench's output/<dataset>/ folder; rename it or point at that folder")
    return stem[:at], dataset, split, method


def published_files(root: Path, *, dataset: str | None = None, model: str | None = None,
                    split: str | None = None, method: str | None = None) -> list[Path]:
    """The published files under ``root`` (an ``output/`` folder, one of its data set folders, or one file)
    that match the filters given, sorted. Refuses a root with none, naming what it holds."""
    root = Path(root).expanduser()
    if root.is_file():
        candidates = [root]
    elif root.is_dir():
        candidates = sorted(root.glob("*.json")) + sorted(root.glob("*/*.json"))
    else:
        raise PublishedFormatError(f"{root}: no such file or folder; pass MedAgentsBench's output/ folder "
                                   f"(or one data set's folder, or one file)")
    found = [path for path in candidates  # parse_name gives (model, dataset, split, method)
             if all(want is None or want == got for want, got in zip((model, dataset, split, method), parse_name(path),
                                                                        strict=True))]
    if not found:
        held = sorted({"/".join(parse_name(p)[:3]) for p in candidates})
        raise PublishedFormatError(
            f"{root}: no published file for " + ", ".join(f"{k} {v}" for k, v in
                                                        (("data set", dataset), ("model", model), ("split", split),
                                                         ("method", method)) if v)
            + f"; it holds (model/data set/split) {', '.join(held) or 'nothing'}")
    return found


def _load(path: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise PublishedFormatError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}); "
                                   f"the file is truncated or damaged: fetch it again") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PublishedFormatError(f"{path}: cannot be read ({exc})") from None
    if not isinstance(data, list) or not all(isinstance(row, dict) for row in data):
        raise PublishedFormatError(f"{path}: expected a JSON list of objects, one per question")
    for i, row in enumerate(data):
        missing = [k for k in _REQUIRED if k not in row]
        if missing:
            raise PublishedFormatError(f"{path}: row {i} (realidx {row.get('realidx')}) has no "
                                       f"{', '.join(missing)}; every row needs {', '.join(_REQUIRED)}")
    return data


def _usage(path: Path, i: int, value: Any) -> tuple[int, int]:
    if value is None:
        return 0, 0
    if isinstance(value, str):
        try:
            value = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            raise PublishedFormatError(f"{path}: row {i}: token_usage {value[:60]!r} is not a mapping") from None
    if not isinstance(value, Mapping):
        raise PublishedFormatError(f"{path}: row {i}: token_usage is not a mapping of prompt/completion tokens")
    try:
        return int(value.get("prompt_tokens") or 0), int(value.get("completion_tokens") or 0)
    except (TypeError, ValueError):
        raise PublishedFormatError(f"{path}: row {i}: token_usage counts are not integers") from None


def _seconds(value: Any) -> float | None:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return None
    return seconds if math.isfinite(seconds) else None


def _prediction(value: Any) -> str | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return str(value)


def _letters(options: Any) -> set[str]:
    if isinstance(options, str):
        try:
            options = ast.literal_eval(options)
        except (ValueError, SyntaxError):
            return set()
    return {str(k) for k in options} if isinstance(options, Mapping) else set()


def _majority(contents: Iterable[list[dict[str, Any]]]) -> dict[str, str]:
    votes: dict[str, Counter[str]] = {}
    for data in contents:
        for row in data:
            if row.get("realidx") is not None:
                votes.setdefault(text_key(str(row["question"])), Counter())[str(row["realidx"])] += 1
    return {text: counts.most_common(1)[0][0] for text, counts in votes.items()}


def reference_of(paths: Sequence[Path]) -> dict[str, str]:
    """Question text (`text_key`) -> id, from published files: for each text, the ``realidx`` most files give."""
    return _majority(_load(path) for path in paths)


def read_all(paths: Sequence[Path], *, known: Mapping[str, str] | None = None) -> list[PublishedRun]:
    """Published files, each read once, their questions matched by text to ``known`` (text -> id: the
    caller's questions) first, else to the ``realidx`` most of these files give (`reference_of`)."""
    loaded = [(Path(path), _load(path)) for path in paths]
    reference = _majority(data for _, data in loaded) | dict(known or {})
    return [_parsed(path, data, reference) for path, data in loaded]


def read_published(path: Path, *, reference: Mapping[str, str] | None = None) -> PublishedRun:
    """One published file as a `PublishedRun` (the module docstring gives the rules)."""
    return _parsed(Path(path), _load(path), reference)


def _parsed(path: Path, data: list[dict[str, Any]], reference: Mapping[str, str] | None) -> PublishedRun:
    model, dataset, split, method = parse_name(path)
    rows: list[PublishedRow] = []
    seen: set[str] = set()
    duplicates = renumbered = unscored = 0
    usage = [_usage(path, i, raw.get("token_usage")) for i, raw in enumerate(data)]
    tokens_reported = any(p or c for p, c in usage)
    seconds = [_seconds(raw.get("time_elapsed")) for raw in data]
    for raw, (prompt, completion), secs in zip(data, usage, seconds, strict=True):
        realidx = None if raw.get("realidx") is None else str(raw["realidx"])
        matched = (reference or {}).get(text_key(str(raw["question"])))
        qid = matched or realidx or f"row-{len(rows) + duplicates}"
        if qid in seen:
            duplicates += 1
            continue
        seen.add(qid)
        renumbered += matched is not None and realidx is not None and matched != realidx
        gold, prediction = str(raw["answer_idx"]), _prediction(raw["predicted_answer"])
        letters = _letters(raw.get("options")) or {gold}
        unscored += prediction not in letters
        rows.append(PublishedRow(
            id=qid, realidx=realidx, question=str(raw["question"]), gold=gold, prediction=prediction,
            correct=prediction == gold, prompt_tokens=prompt if tokens_reported else None,
            completion_tokens=completion if tokens_reported else None, seconds=secs,
            route=str(raw["difficulty"]) if raw.get("difficulty") is not None else None))
    return PublishedRun(path=str(path), model=model, dataset=dataset, split=split, method=method, rows=tuple(rows),
                        duplicates=duplicates, renumbered=renumbered, unscored=unscored,
                        tokens_reported=tokens_reported, seconds_reported=any(s is not None for s in seconds))


def cot_answer_tokens(root: Path, model: str) -> float:
    """The mean billed completion tokens of ``model``'s chain-of-thought answers on MedQA's hard set, from the
    published outputs under ``root``: the hosted families' answer lengths `teammed.estimate.PUBLISHED_VERBOSITY`
    carries."""
    run = read_published(published_files(root, dataset="medqa", model=model, split="test_hard", method="cot")[0])
    tokens = [r.completion_tokens for r in run.rows if r.completion_tokens is not None]
    if not tokens:
        raise PublishedFormatError(f"{run.path} reports no completion tokens")
    return sum(tokens) / len(tokens)
