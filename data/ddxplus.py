"""DDXPlus synthetic patients as differential-diagnosis questions (local release files only).

Inputs, as released on figshare: a patients CSV with ``AGE``, ``SEX``, ``PATHOLOGY``,
``EVIDENCES`` (a list as text, e.g. ``"['E_91', 'E_55_@_V_89']"``; ``code_@_value`` gives a
categorical, multi-choice or numeric answer), ``INITIAL_EVIDENCE`` and
``DIFFERENTIAL_DIAGNOSIS`` (a list of ``[condition, probability]`` pairs as text); plus
``release_evidences.json`` (code -> ``question_en``, ``data_type``, ``is_antecedent``,
``value_meaning`` {value: {"en": ...}}) and ``release_conditions.json`` (condition name ->
``cond-name-eng``).

Each patient becomes a vignette (age, sex, the chief complaint, then the interview answers,
symptoms apart from history) and the question "What is the most likely diagnosis?". Options
are the ``n_options`` (default 5) most probable conditions of the differential, with the true
``PATHOLOGY`` swapped in for the last one when absent, in English, shuffled by
``random.Random(f"{seed}:{row index}")`` so the gold letter varies but is reproducible.

Local files in the data directory, first match wins: ``ddxplus/release_{split}_patients.csv``,
``ddxplus/release_{split}_patients.zip`` (the release archive as downloaded),
``ddxplus/release_{split}_patients`` (the unzipped file has no suffix), then the same three
directly in the data directory; ``{split}`` is ``train``, ``validate`` (alias
``validation``) or ``test``. The two JSON files are looked for next to the patients file,
then in the data directory and ``<data dir>/ddxplus``, or given as ``evidences_path`` and
``conditions_path``.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from teammed.data._fields import lettered, parsed_list, text
from teammed.data._rows import Row, map_rows
from teammed.data._spec import DatasetSpec, Origin
from teammed.errors import DataError
from teammed.types import LETTERS, Question

__all__ = ["ddxplus_question", "ddxplus_questions", "patient_vignette", "SPEC"]

QUESTION = "What is the most likely diagnosis?"
EVIDENCES_FILE = "release_evidences.json"
CONDITIONS_FILE = "release_conditions.json"
_SEX = {"M": "male", "F": "female"}


def ddxplus_question(
    row: Mapping[str, Any],
    index: int = 0,
    *,
    evidences: Mapping[str, Any],
    conditions: Mapping[str, str],
    seed: int = 0,
    n_options: int = 5,
    id_prefix: str = "ddxplus",
) -> Question:
    """One patient as a Question; ``conditions`` maps every condition name to its English name."""
    pathology = _english(text(row["PATHOLOGY"]), conditions)
    rng = random.Random(f"{seed}:{index}")
    names = _option_names(row, pathology, conditions, n_options, rng)
    rng.shuffle(names)
    return Question(
        id=f"{id_prefix}-{index}",
        question=f"{patient_vignette(row, evidences)}\n\n{QUESTION}",
        options=lettered(names),
        answer_idx=LETTERS[names.index(pathology)],
        meta={
            "dataset": "ddxplus",
            "pathology": pathology,
            "age": text(row.get("AGE")),
            "sex": text(row.get("SEX")),
            "initial_evidence": text(row.get("INITIAL_EVIDENCE")),
        },
    )


def ddxplus_questions(
    rows: Iterable[Row | Mapping[str, Any]],
    *,
    evidences: Mapping[str, Any],
    conditions: Mapping[str, Any],
    seed: int = 0,
    n_options: int = 5,
    id_prefix: str = "ddxplus",
) -> list[Question]:
    """Patients as questions, given the parsed ``release_evidences.json`` and ``release_conditions.json``."""
    if not 2 <= n_options <= 10:
        raise DataError(f"n_options must be between 2 and 10 (got {n_options})")
    mapper = partial(ddxplus_question, evidences=evidences, conditions=english_names(conditions),
                     seed=seed, n_options=n_options, id_prefix=id_prefix)
    return map_rows(rows, mapper)


def english_names(conditions: Mapping[str, Any]) -> dict[str, str]:
    """Every spelling of each condition (key, French, English) -> its English name."""
    names: dict[str, str] = {}
    for key, entry in conditions.items():
        english = text(entry.get("cond-name-eng")) or text(entry.get("condition_name")) or key
        for spelling in (key, entry.get("condition_name"), entry.get("cond-name-fr"), english):
            if text(spelling):
                names[text(spelling)] = english
    return names


def patient_vignette(row: Mapping[str, Any], evidences: Mapping[str, Any]) -> str:
    """A readable case: who the patient is, the chief complaint, then the interview answers."""
    answers = _answers(parsed_list(row["EVIDENCES"], "EVIDENCES"), evidences)
    initial = text(row.get("INITIAL_EVIDENCE"))
    sex = _SEX.get(text(row.get("SEX")).upper(), "patient of unrecorded sex")
    lines = [f"A {text(row.get('AGE'))}-year-old {sex} consults. Answers to the triage interview:"]
    if initial:
        lines.append(f"Chief complaint: {_line(initial, answers.get(initial, ['yes']), evidences)}")
    symptoms = [c for c in answers if c != initial and not evidences[c].get("is_antecedent")]
    history = [c for c in answers if c != initial and evidences[c].get("is_antecedent")]
    for title, codes in (("Symptoms", symptoms), ("History and risk factors", history)):
        if codes:
            lines.append(f"{title}:")
            lines.extend(f"- {_line(code, answers[code], evidences)}" for code in codes)
    return "\n".join(lines)


def _answers(items: Sequence[Any], evidences: Mapping[str, Any]) -> dict[str, list[str]]:
    """Evidence code -> answers, in the patient's order; ``E_55_@_V_89`` adds V_89 to E_55."""
    answers: dict[str, list[str]] = {}
    for item in items:
        code, _, value = text(item).partition("_@_")
        if code not in evidences:
            raise ValueError(f"unknown evidence code {code!r} (not in {EVIDENCES_FILE})")
        meanings = evidences[code].get("value_meaning") or {}
        answers.setdefault(code, []).append(_meaning(value, meanings) if value else "yes")
    return answers


def _meaning(value: str, meanings: Mapping[str, Any]) -> str:
    meaning = meanings.get(value)
    return text(meaning.get("en")) if isinstance(meaning, Mapping) else value


def _line(code: str, answers: list[str], evidences: Mapping[str, Any]) -> str:
    return f"{text(evidences.get(code, {}).get('question_en')) or code} {', '.join(answers)}"


def _option_names(
    row: Mapping[str, Any], pathology: str, conditions: Mapping[str, str], n: int, rng: random.Random
) -> list[str]:
    pairs = parsed_list(row.get("DIFFERENTIAL_DIAGNOSIS") or "[]", "DIFFERENTIAL_DIAGNOSIS")
    ranked = sorted(pairs, key=lambda pair: -float(pair[1]))
    names = list(dict.fromkeys(_english(text(name), conditions) for name, _ in ranked))[:n]
    if pathology not in names:
        names = names[: n - 1] + [pathology]
    others = sorted(set(conditions.values()) - set(names))
    while len(names) < 2 and others:
        names.append(others.pop(rng.randrange(len(others))))
    return names


def _english(name: str, conditions: Mapping[str, str]) -> str:
    if name not in conditions:
        raise ValueError(f"unknown condition {name!r} (not in {CONDITIONS_FILE})")
    return conditions[name]


def _side_file(name: str, given: str | Path | None, origin: Origin) -> dict[str, Any]:
    if given is not None:
        candidates = [Path(given).expanduser()]
    else:
        nested = origin.data_dir / "ddxplus" if origin.data_dir else None
        folders = [origin.directory, origin.data_dir, nested]
        candidates = [folder / name for folder in dict.fromkeys(folders) if folder is not None]
    for path in candidates:
        if path.is_file():
            try:
                return json.loads(path.read_text(encoding="utf-8"))
            except json.JSONDecodeError as exc:
                raise DataError(f"{path}: invalid JSON ({exc.msg} at line {exc.lineno})") from exc
    looked = ", ".join(str(p) for p in candidates) or "nowhere (no data directory)"
    raise DataError(
        f"DDXPlus needs {name} from the release next to the patients file; looked in {looked}. "
        f"Put it there or pass {'evidences_path' if name == EVIDENCES_FILE else 'conditions_path'}=..."
    )


def _build(
    rows: list[Row],
    origin: Origin,
    *,
    seed: int = 0,
    n_options: int = 5,
    evidences_path: str | Path | None = None,
    conditions_path: str | Path | None = None,
) -> list[Question]:
    return ddxplus_questions(
        rows,
        evidences=_side_file(EVIDENCES_FILE, evidences_path, origin),
        conditions=_side_file(CONDITIONS_FILE, conditions_path, origin),
        seed=seed,
        n_options=n_options,
        id_prefix=f"ddxplus-{origin.split}",
    )


_PATIENTS = "release_{split}_patients"

SPEC = DatasetSpec(
    name="ddxplus",
    summary="DDXPlus differential diagnosis from synthetic patient interviews (figshare release files)",
    schema=f"the release's patients CSV (AGE, SEX, PATHOLOGY, EVIDENCES, INITIAL_EVIDENCE, "
    f"DIFFERENTIAL_DIAGNOSIS) with {EVIDENCES_FILE} and {CONDITIONS_FILE} beside it",
    build=_build,
    files=tuple(
        f"{folder}{_PATIENTS}{suffix}" for folder in ("ddxplus/", "") for suffix in (".csv", ".zip", "")
    ),
    splits=("train", "validation", "test"),
    split_files={"validation": ("validate", "validation")},
    local_only="DDXPlus is distributed as release files on figshare (see the DDXPlus paper), "
    "and its questions need the evidences and conditions JSON files beside the patients file",
    aliases=("ddx_plus", "ddx-plus"),
)
