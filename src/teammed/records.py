"""The typed, versioned records a run writes: its identity and one result row per question.

`RunIdentity` is what makes two runs the same run: system, label, configuration, compiled
program (content hash), model, deployments and server (``--api-base``, credentials masked), temperature,
data set (name + content hash), split, sample (n, seed, question ids) and teammed version.
``--resume`` continues a run directory only under the same identity (`identity_differences`
names what differs).

`ResultRow` is one question's outcome. ``schema_version`` 2 is written today; rows written
before it existed (no ``schema_version``) load as version 1 and are upgraded on reading
(`load_row`): a row without a gold letter is *unlabeled* (``correct`` null), not wrong.
A row from a newer schema is refused with a message naming the fix.

A teamwork row's ``record`` is a `teammed.programs.record.Deliberation` in its stored form. The peer
systems (MDAgents, KAMAC, consultation, voting) write records of their own: `PeerRecord` reads the
keys they share (team, round-2 and final first choices, votes by turn, route, experts, rounds,
reassignments). `TranscriptEvent` reads one entry of a row's ``transcript``.

This module is pure data plus two small file helpers (`write_atomic`, `dataset_digest`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from teammed.errors import DataError
from teammed.types import Question

if TYPE_CHECKING:
    from teammed.deliberation import Deliberation

logger = logging.getLogger(__name__)

__all__ = [
    "SCHEMA_VERSION",
    "RunIdentity",
    "ResultRow",
    "PeerAgent",
    "PeerVote",
    "PeerRecord",
    "EventPayload",
    "TranscriptEvent",
    "read_record",
    "load_row",
    "iter_rows",
    "identity_differences",
    "dataset_digest",
    "file_digest",
    "prompt_digest",
    "write_atomic",
    "redacted_argv",
    "tuning_record",
    "read_tuning",
    "read_tuning_records",
    "question_fingerprint",
]

SCHEMA_VERSION = 2


class RunIdentity(BaseModel):
    """Everything that must be equal for two sessions to write into one run directory."""

    model_config = ConfigDict(frozen=True)

    system: str
    label: str
    config: dict[str, Any] | None = None
    program: str | None = Field(default=None, description="Path of the compiled program, as given.")
    program_sha256: str | None = None
    program_config: dict[str, Any] | None = None
    model: str
    deployments: list[str] = Field(default_factory=list, description="Redacted deployment specs.")
    api_base: str | None = Field(default=None, description="The --api-base server, credentials masked (None: "
                                 "none given; run.json files written before this field load as None).")
    dataset: str
    dataset_sha256: str
    split: str
    revision: str | None = Field(default=None, description="The Hugging Face hub revision pinned by --revision.")
    n: int | None = None
    seed: int | None = None
    stratify: str | None = None
    shuffle_options: bool = False
    question_ids: list[str] = Field(default_factory=list)
    teammed_version: str | None = None
    temperature: float = Field(default=0.0, description="--temperature of every call (run.json files written "
                               "before this field load as 0, the default they ran with).")


# Fields compared on --resume; ``program`` (a path) is not: the content hash is what counts.
_COMPARED = tuple(name for name in RunIdentity.model_fields if name != "program")


def _show(value: Any) -> str:
    if isinstance(value, list) and len(value) > 6:
        return f"[{len(value)} items: {', '.join(map(str, value[:3]))}, ...]"
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 160 else text[:157] + "..."


def identity_differences(old: RunIdentity, new: RunIdentity) -> list[str]:
    """``field: old -> new`` for every compared field that differs (empty when the same run)."""
    out = []
    for name in _COMPARED:
        before, after = getattr(old, name), getattr(new, name)
        if before == after:
            continue
        if isinstance(before, dict) and isinstance(after, dict):  # name the keys that differ
            out += [f"{name}.{key}: {_show(before.get(key))} (run) vs {_show(after.get(key))} (now)"
                    for key in sorted(set(before) | set(after), key=str) if before.get(key) != after.get(key)]
        else:
            out.append(f"{name}: {_show(before)} (run) vs {_show(after)} (now)")
    return out


class ResultRow(BaseModel):
    """One question's outcome: answer or error, accounting and the system's record.

    ``correct`` is null for an unlabeled question (no gold letter): it is answered but left
    out of accuracy and calibration. A failed row has ``failed`` true, ``prediction`` null
    and ``error`` naming why (``error_type``/``error_kind`` classify it). Token and cost
    fields are *billable* (what the backend would charge, cache or not); ``spent_*`` is what
    this session actually paid. ``cached_prompt_tokens`` is the part of ``prompt_tokens`` the
    provider reported as served from its prompt cache (0 in rows written before it was recorded).
    Unknown keys (e.g. newer usage counters) are kept.
    """

    model_config = ConfigDict(extra="allow")

    schema_version: int = SCHEMA_VERSION
    id: str
    dataset: str | None = None
    dataset_sha256: str | None = None
    split: str | None = None
    seed: int | None = None
    system: str | None = None
    label: str | None = None
    program_sha256: str | None = None
    deployment: str | None = None
    # the deployments that answered this question's calls: [{model, api_base (redacted), calls}], one per
    # distinct deployment (several when a Router spread the calls); empty for rows written before it
    answered_by: list[dict[str, Any]] = Field(default_factory=list)
    gold: str | None = None
    prediction: str | None = None
    correct: bool | None = None
    labeled: bool = True
    failed: bool = False
    error: str | None = None
    error_type: str | None = None
    error_kind: str | None = None
    confidence: Any = None
    question: str | None = None
    context: str | None = None
    options: dict[str, str] = Field(default_factory=dict)
    binary_positive: str | None = None
    calls: int = 0
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0  # of prompt_tokens, read from the provider's prompt cache (billable)
    completion_tokens: int = 0
    cost_usd: float = 0.0
    spent_prompt_tokens: int | None = None
    spent_completion_tokens: int | None = None
    spent_cost_usd: float | None = None
    cache_hits: int = 0
    retries: int = 0
    parse_failures: int = 0
    repaired: int = 0
    ranking_repairs: int = 0
    fallbacks: int = 0
    calls_by_signature: dict[str, int] = Field(default_factory=dict)
    latency_s: float = 0.0
    lm_latency_s: float = 0.0
    n_agents: int | None = None
    roles: list[Any] = Field(default_factory=list)
    trust: Any = None
    config: dict[str, Any] | None = None
    rationale: str | None = None
    record: dict[str, Any] = Field(default_factory=dict)
    transcript: list[Any] = Field(default_factory=list)
    meta: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _nulls_and_ids(cls, data: Any) -> Any:
        """A null container reads as empty and a numeric id as text: what other tools write."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for key, empty in (("record", {}), ("transcript", []), ("options", {}), ("roles", []), ("meta", {}),
                           ("calls_by_signature", {}), ("answered_by", [])):
            if key in data and data[key] is None:
                data[key] = type(empty)()
        if isinstance(data.get("id"), int) and not isinstance(data.get("id"), bool):
            data["id"] = str(data["id"])
        if "labeled" not in data and "gold" in data and data["gold"] is None:  # no gold: nothing to score
            data["labeled"], data["correct"] = False, None
        return data

    def to_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), default=str)

    @property
    def answered_models(self) -> str | None:
        """The model strings that answered this question, sorted and joined with ``+`` (None: not recorded)."""
        models = sorted({str(d.get("model")) for d in self.answered_by if isinstance(d, dict) and d.get("model")})
        return "+".join(models) or None


class _Reader(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


def _as_text(value: Any) -> Any:
    """A number where text belongs (an id, a numeric confidence) reads as its text; anything else
    that is not text reads as absent, so one odd entry never drops a whole record."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return str(value)
    return None


def _as_texts(value: Any) -> Any:
    return [t for v in value if (t := _as_text(v)) is not None] if isinstance(value, list) else None


_Text = Annotated[str | None, BeforeValidator(_as_text)]


def _entries(value: Any) -> Any:
    """The entries of a list that are objects (an odd entry is dropped, not the record)."""
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def _votes(value: Any) -> Any:
    if not isinstance(value, Mapping):
        return None
    return {str(k): [_as_text(x) for x in v] for k, v in value.items() if isinstance(v, list)}


def _number(value: Any) -> Any:
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


class PeerAgent(_Reader):
    """One member of a peer system's team (MDAgents keeps no expertise or weight for some routes)."""

    id: _Text = None
    role: _Text = None
    expertise: _Text = None
    weight: Annotated[float | None, BeforeValidator(lambda v: v if isinstance(v, int | float) else None)] = None


class PeerVote(_Reader):
    """One agent's choice at one stage of a peer system's deliberation."""

    agent: _Text = None
    first: _Text = None
    ranking: Annotated[list[str] | None, BeforeValidator(_as_texts)] = None
    confidence: _Text = None

    @property
    def choice(self) -> str | None:
        """Its ``first`` choice, else the head of its ranking."""
        return self.first or (self.ranking[0] if self.ranking else None)


class PeerRecord(_Reader):
    """The keys the peer systems' records share, read where a record is not a ``Deliberation``.

    Every key is optional (each system keeps some): ``route`` (MDAgents), ``experts`` and
    ``agents`` (the team), ``r2``/``final`` (first and last choices), ``votes_by_turn``,
    ``rounds`` and ``reassignments`` (KAMAC, consultation, voting). Other keys are ignored.
    """

    route: _Text = None
    experts: list[Any] | None = None
    agents: Annotated[list[PeerAgent], BeforeValidator(_entries)] = Field(default_factory=list)
    r2: Annotated[list[PeerVote], BeforeValidator(_entries)] = Field(default_factory=list)
    final: Annotated[list[PeerVote], BeforeValidator(_entries)] = Field(default_factory=list)
    votes_by_turn: Annotated[dict[str, list[str | None]] | None, BeforeValidator(_votes)] = None
    rounds: Annotated[float | None, BeforeValidator(_number)] = None
    reassignments: Annotated[float | None, BeforeValidator(_number)] = None


class EventPayload(_Reader):
    """The typed view of a transcript event's payload: the keys the behaviours write (each kind
    some of them); a value of the wrong type reads as absent, other keys are ignored."""

    ranking: Annotated[list[str] | None, BeforeValidator(_as_texts)] = None
    choice: _Text = None
    confidence: _Text = None
    severity: _Text = None  # a challenge's
    response: _Text = None
    verdict: _Text = None
    choice_before: _Text = None
    choice_after: _Text = None
    trust_before: Annotated[float | None, BeforeValidator(_number)] = None
    trust_after: Annotated[float | None, BeforeValidator(_number)] = None


class TranscriptEvent(_Reader):
    """One entry of a row's readable transcript: who said what, in which phase.

    ``data`` is the event's own payload (a ranking, a choice, a challenge's verdict ...) as the
    behaviour that wrote it stored it; `payload` reads it typed.
    """

    phase: str | None = None
    turn: int | None = None
    agent: str | None = None
    role: str | None = None
    kind: str | None = None
    text: str | None = None
    data: dict[str, Any] | None = None

    @property
    def payload(self) -> EventPayload:
        return EventPayload.model_validate(self.data or {})


def read_record(value: Any, *, answer: str | None = None) -> Deliberation | PeerRecord | None:
    """A system's record typed: a `Deliberation` (or its stored form), else a `PeerRecord`; None for
    no record (empty or null) or one neither reads.

    A teamwork record written before the record kept its ``answer`` (record version 1, the same
    keys otherwise) reads as a `Deliberation` answering ``answer`` (the row's prediction), when given.
    """
    from teammed.deliberation import Deliberation

    if isinstance(value, Deliberation | PeerRecord):
        return value
    if not isinstance(value, Mapping) or not value:
        return None
    if answer is not None and "answer" not in value:
        value = {**value, "answer": answer}
    try:
        return Deliberation.model_validate(value)
    except ValidationError:
        pass
    salvaged = _salvage_deliberation(value, answer)
    if salvaged is not None:
        return salvaged
    try:
        return PeerRecord.model_validate(value)
    except ValidationError:
        return None


_TEAMWORK_KEYS = frozenset({"agents", "r2", "final", "scores", "aggregation"})  # no peer record has them all


def _salvage_deliberation(value: Mapping[str, Any], answer: str | None) -> Deliberation | None:
    """A teamwork record of an older or damaged shape, read field by field: unknown keys are left out,
    a list keeps the entries that validate, a missing or unreadable field takes its empty value,
    and the answer is the record's, else the row's prediction, else the top Borda score. None when
    the record is not teamwork-shaped or still does not validate."""
    from typing import get_args, get_origin

    from pydantic import TypeAdapter

    from teammed.deliberation import Deliberation

    if not _TEAMWORK_KEYS <= set(value):
        return None
    data: dict[str, Any] = {}
    for name, field in Deliberation.model_fields.items():
        annotation: Any = field.annotation  # always set on a declared field
        if name in value:
            raw = value[name]
            try:
                data[name] = TypeAdapter(annotation).validate_python(raw)
                continue
            except ValidationError:
                if get_origin(annotation) is list and isinstance(raw, list):
                    item = TypeAdapter(get_args(annotation)[0])
                    kept = []
                    for entry in raw:
                        try:
                            kept.append(item.validate_python(entry))
                        except ValidationError:
                            continue
                    data[name] = kept
                    continue
        if not field.is_required():
            continue
        data[name] = _empty(annotation)
    scores = data.get("scores") or {}
    data["answer"] = (value.get("answer") if isinstance(value.get("answer"), str) else None) or answer or (
        max(scores, key=lambda k: scores[k]) if scores else None)
    if not data["answer"]:
        return None
    try:
        return Deliberation.model_validate(data)
    except ValidationError:
        return None


def _empty(annotation: Any) -> Any:
    """The empty value of a record field's type: [], {}, "", False, an empty sub-record, or None."""
    from typing import get_args, get_origin

    origin = get_origin(annotation)
    if origin is list:
        return []
    if origin is dict:
        return {}
    if type(None) in get_args(annotation):
        return None
    if annotation is str:
        return ""
    if annotation is bool:
        return False
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return {}
    return None


def load_row(data: Any, *, where: str = "row") -> ResultRow:
    """A `ResultRow` from a decoded JSON line, upgrading rows written before schema versions.

    Raises `DataError` naming ``where`` and the fix for a row that is not an object, comes
    from a newer schema, or does not validate.
    """
    if not isinstance(data, dict):
        raise DataError(f"{where} must be a JSON object per question (got {type(data).__name__})")
    version = data.get("schema_version", 1)
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise DataError(f"{where} has result schema_version {version!r}, newer than this teammed reads "
                        f"({SCHEMA_VERSION}); upgrade teammed to read it")
    if version < SCHEMA_VERSION:
        data = _upgrade_v1(data)
    try:
        return ResultRow.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(map(str, first["loc"]))
        raise DataError(f"{where} is not a valid result row ({field}: {first['msg']}); fix or remove "
                        f"that line") from None


def iter_rows(path: Path, *, fix: str = "fix or remove that line") -> Iterator[tuple[ResultRow, bytes]]:
    """Each row of a ``results.jsonl`` with its stored line, read one line at a time (the one reader
    of result files: the runner's resume and the report both read through it).

    A last line without its newline that is not valid JSON is a torn write (a crash mid-line): it
    is left out with a warning (``--resume`` cuts it). Any other unreadable line is a `DataError`
    naming the file, the line and ``fix``.
    """
    with Path(path).open("rb") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
            except json.JSONDecodeError as exc:
                if not line.endswith(b"\n"):
                    logger.warning("%s: ignoring a torn last line (the run was interrupted; --resume cuts it)", path)
                    return
                raise DataError(f"{path}:{number} is not valid JSON ({exc.msg}); {fix}") from None
            yield load_row(data, where=f"{path}:{number}"), line


def _upgrade_v1(data: dict[str, Any]) -> dict[str, Any]:
    """A row written before schema versions: an unlabeled question was scored wrong then."""
    row = {k: v for k, v in data.items() if v is not None or k in ("gold", "prediction", "error")}
    labeled = "gold" not in data or data["gold"] is not None
    row["labeled"] = labeled
    row["correct"] = bool(data.get("correct")) if labeled else None
    row["schema_version"] = SCHEMA_VERSION
    row["legacy_schema_version"] = 1
    for key in ("seed", "n_agents"):
        if key in row and not isinstance(row[key], int):
            row[key] = None
    return row


def tuning_record(*, dataset: str, dataset_sha256: str | None, split: str | None,
                  question_ids: Sequence[str], question_sha256: Sequence[str] | None = None) -> dict[str, Any]:
    """The one record a Special Set (``tuning``) or compiled program (meta ``tuned_on``) keeps of
    the questions it was tuned on: their ids within the data set (name and content hash) and each
    question's content fingerprint (`question_fingerprint`); `run` leaves out what matches."""
    record: dict[str, Any] = {"dataset": dataset, "dataset_sha256": dataset_sha256, "split": split,
                              "question_ids": [str(i) for i in question_ids]}
    if question_sha256 is not None:
        record["question_sha256"] = list(question_sha256)
    return record


def question_fingerprint(question: Question) -> str:
    """A question's content, independent of its id, loader and option order: sha256 of the stem, the
    context and the sorted option texts (16 hex digits). The same MedQA question read from two files
    has one fingerprint; two questions that merely share an id do not."""
    parts = [question.question.strip(), (question.context or "").strip(),
             *sorted(text.strip() for text in question.options.values())]
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()[:16]


def read_tuning_records(document: Any, *, where: str) -> list[dict[str, Any]]:
    """Every tuning record a Special Set or program document (or its meta) keeps, normalised to
    ``{dataset, dataset_sha256, question_ids, question_sha256}`` (None where the file has no such
    field: the legacy ``tuning_ids`` list has ids only). A record present but unreadable is refused."""
    if not isinstance(document, dict):
        return []
    records = []
    for key in _TUNING_KEYS:
        if key not in document or document[key] is None:
            continue
        value = document[key]
        record = value if isinstance(value, dict) else {"question_ids": value}
        ids, prints = record.get("question_ids"), record.get("question_sha256")
        if not isinstance(ids, list) or not (prints is None or isinstance(prints, list)):
            raise DataError(f"{where}: its {key!r} record of tuning questions is not readable (expected "
                            f"question_ids as a list); fix the file or re-create it with this teammed")
        records.append({"dataset": record.get("dataset"), "dataset_sha256": record.get("dataset_sha256"),
                        "question_ids": [str(i) for i in ids],
                        "question_sha256": [str(p) for p in prints] if prints is not None else None})
    return records


# Where tuning records have been written: the shared record first, then the legacy bare id lists
# (``tuning_ids``, written by `tune` before the shared record existed).
_TUNING_KEYS = ("tuning", "tuned_on", "tuning_ids")


def read_tuning(document: Any, *, where: str) -> list[str] | None:
    """The tuned-on question ids a Special Set or program document (or its meta) records, None when it
    records none (all records merged; see `read_tuning_records` for their data sets and fingerprints)."""
    records = read_tuning_records(document, where=where)
    return [i for r in records for i in r["question_ids"]] if records else None


def redacted_argv(argv: Sequence[str]) -> list[str]:
    """The command line with credentials masked (URL passwords, key parameters, sk- keys)."""
    from teammed.redact import redact

    return [redact(a) for a in argv]


def dataset_digest(questions: Sequence[Question]) -> str:
    """sha256 of the questions' content (canonical JSON, in order): a data set's identity."""
    digest = hashlib.sha256()
    for q in questions:
        digest.update(json.dumps(q.model_dump(mode="json"), sort_keys=True, default=str).encode())
        digest.update(b"\n")
    return digest.hexdigest()


def prompt_digest(program: Any) -> str:
    """sha256 of a DSPy program's prompts: every predictor's signature (instructions, fields and their
    descriptions) and demos, as ``program.dump_state()`` holds them (canonical JSON)."""
    state = program.dump_state() if hasattr(program, "dump_state") else {}
    return hashlib.sha256(json.dumps(state, sort_keys=True, default=str).encode()).hexdigest()


def file_digest(path: Path | str) -> str:
    """sha256 of a file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_atomic(path: Path | str, text: str | Iterable[str]) -> Path:
    """Write ``text`` (a string, or chunks written as they come) so that ``path`` holds either the
    old or the new content, never a mix: a temporary file in the same directory, fsync'd, then
    ``os.replace``; removed on failure.

    The file gets the mode any new file gets (0644 under the usual umask), so colleagues in a
    shared project folder can read results; nothing teammed writes holds a credential (see
    `teammed.redact`). This is the one writer of teammed's JSON, Markdown and program files.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            if isinstance(text, str):
                handle.write(text)
            else:
                handle.writelines(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    try:  # make the rename itself durable
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError:
        pass
    return path
