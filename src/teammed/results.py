"""The typed contract of a run's results: its identity, one row per question, one record per system.

`RunIdentity` is what makes two runs the same run (``--resume`` continues a run directory only under
the same identity; `identity_differences` names what differs). `ResultRow` is one question's outcome;
its ``record`` is the `Record` model its ``system`` registers (`teammed.systems`), never a dict. Rows
of schema versions 1 and 2 load through one legacy reader (`load_row`), a row of a newer one is refused;
`load_rows` reads a run directory's rows. docs/results.md states the identity's fields, each record
model and the legacy reading rules.

This module is the bottom layer of results: it imports only `teammed.errors`, `teammed.deliberation`
and the system registry (`teammed.systems`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Container, Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, TypeAlias, get_args, get_origin

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, SerializeAsAny, ValidationError, model_validator

from teammed.deliberation import Deliberation
from teammed.errors import DataError
from teammed.systems import record_model

logger = logging.getLogger(__name__)

__all__ = [
    "SCHEMA_VERSION",
    "Confidence",
    "RunIdentity",
    "ResultRow",
    "Record",
    "PeerAgent",
    "PeerVote",
    "PeerRecord",
    "SystemRecord",
    "VoteRecord",
    "MajorityVoteRecord",
    "ConsensusRecord",
    "ConsultationRecord",
    "AdvocateTurn",
    "HistoryCheck",
    "KamacRecord",
    "MdagentsRecord",
    "MdagentsTeam",
    "ZeroShotRecord",
    "CotRecord",
    "FewShotRecord",
    "AdaptiveRecord",
    "AdaptiveStage",
    "Deliberation",
    "EventPayload",
    "TranscriptEvent",
    "typed_record",
    "read_record",
    "load_row",
    "iter_rows",
    "load_rows",
    "identity_differences",
]

SCHEMA_VERSION = 3

Confidence: TypeAlias = Literal["High", "Medium", "Low"]
_CONFIDENCES = ("High", "Medium", "Low")


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
    temperature: float | None = Field(default=0.0, description="--temperature of every call (run.json files "
                                      "written before this field load as 0, the default they ran with); None: a "
                                      "caller's own LM that sets none.")
    shard: str | None = Field(default=None, description="--shard I/N: this run holds the I-th of N disjoint parts "
                              "of the sample (None: all of it); `report` merges the N parts into one run.")


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


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


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


def _whole(value: Any) -> Any:
    """A whole number (an int, or a float without a fraction), else absent."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value) if value == int(value) else None


def _counts(value: Any) -> Any:
    if not isinstance(value, Mapping):
        return {}
    return {str(k): v for k, v in value.items() if isinstance(v, int) and not isinstance(v, bool)}


class PeerAgent(_Reader):
    """One member of a peer system's team (MDAgents keeps no expertise or weight for some routes;
    consultation and MDAgents' advanced route name its ``team``, KAMAC the round it ``joined_round``)."""

    id: _Text = None
    role: _Text = None
    expertise: _Text = None
    weight: Annotated[float | None, BeforeValidator(lambda v: v if isinstance(v, int | float) else None)] = None
    team: int | str | None = None
    joined_round: Annotated[int | None, BeforeValidator(_whole)] = None


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
    """The keys the peer systems' records share: the common base of every peer system's model.

    Every key is optional (each system keeps some): ``route`` (MDAgents), ``experts`` and
    ``agents`` (the team), ``r2``/``final`` (first and last choices), ``votes_by_turn``,
    ``rounds`` and ``reassignments`` (KAMAC, consultation, voting), ``consensus``, ``method``,
    ``dropped`` (ballots naming no option) and the fallbacks counted while the system ran.
    Read on its own (`read_record` of a record whose system is unknown) it ignores other keys;
    each system's subclass forbids keys it does not declare.
    """

    system: str | None = None
    route: _Text = None
    experts: Annotated[list[str] | None, BeforeValidator(_as_texts)] = None
    agents: Annotated[list[PeerAgent], BeforeValidator(_entries)] = Field(default_factory=list)
    r2: Annotated[list[PeerVote], BeforeValidator(_entries)] = Field(default_factory=list)
    final: Annotated[list[PeerVote], BeforeValidator(_entries)] = Field(default_factory=list)
    votes_by_turn: Annotated[dict[str, list[str | None]] | None, BeforeValidator(_votes)] = None
    rounds: Annotated[int | None, BeforeValidator(_whole)] = None
    reassignments: Annotated[int | None, BeforeValidator(_whole)] = None
    consensus: Annotated[bool | None, BeforeValidator(lambda v: v if isinstance(v, bool) else None)] = None
    method: _Text = None
    dropped: Annotated[int | None, BeforeValidator(_whole)] = None
    fallbacks: Annotated[int, BeforeValidator(lambda v: _whole(v) or 0)] = 0
    fallbacks_by_behaviour: Annotated[dict[str, int], BeforeValidator(_counts)] = Field(default_factory=dict)


class SystemRecord(PeerRecord):
    """The base of a system's record model: frozen, refusing keys it does not declare, its ``system`` tag
    always written. A system's model adds ``system: Literal[name]`` and its own fields."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    def model_post_init(self, context: Any, /) -> None:
        self.__pydantic_fields_set__.add("system")  # the union's tag is always written, even by exclude_unset


class VoteRecord(SystemRecord):
    """Majority vote and consensus: ``share`` is the winner's share of the whole panel."""

    share: float | None = None


class MajorityVoteRecord(VoteRecord):
    """``majority_vote``: independent ballots, the plurality wins (``rounds`` 0)."""

    system: Literal["majority_vote"] = "majority_vote"


class ConsensusRecord(VoteRecord):
    """``consensus``: ballots revised until unanimous (``method`` consensus) or the rounds run out
    (``method`` majority)."""

    system: Literal["consensus"] = "consensus"


class AdvocateTurn(_Frozen):
    """A devil's advocate consultation appointed: in which team and round, who, against which answer."""

    team: int
    round: int
    agent: str
    against: str | None = None


class HistoryCheck(_Frozen):
    """The size of a consultation team's history before a round (tokens)."""

    team: int
    round: int
    tokens: int


class HistorySummary(_Frozen):
    """One summarising step that shortened a consultation team's history before a round."""

    team: int
    round: int
    tokens_before: int
    tokens_after: int


class ConsultationRecord(SystemRecord):
    """``consultation``: teams consulted in turn (``rounds_by_team``, ``reassignments``), their
    anti-groupthink setting (``dissent``, ``devil_advocates``), history sizes and summaries, and the
    manager's decision."""

    system: Literal["consultation"] = "consultation"
    rounds_by_team: list[int] = Field(default_factory=list)
    consensus_share: float | None = None
    dissent: str | None = None
    devil_advocates: list[AdvocateTurn] = Field(default_factory=list)
    history_tokens: list[HistoryCheck] = Field(default_factory=list)
    summaries: list[HistorySummary] = Field(default_factory=list)
    manager: dict[str, str | None] | None = None


class KamacRecord(SystemRecord):
    """``kamac``: the specialists recruited in each round and the answer a consensus reached."""

    system: Literal["kamac"] = "kamac"
    recruited_per_round: list[list[str]] = Field(default_factory=list)
    consensus_answer: str | None = None


class MdagentsTeam(_Frozen):
    """One team of MDAgents' advanced route: its name, roles and answer."""

    name: str
    roles: list[str] = Field(default_factory=list)
    answer: str | None = None


class MdagentsRecord(SystemRecord):
    """``mdagents``: the ``route`` triage chose (``route_fell_back`` when it named none) and why,
    the advanced route's ``teams``, and the ``variant`` that ran (``paper``: MDAgents' own
    discussion; ``light``: the lighter one; None in records written before variants existed)."""

    system: Literal["mdagents"] = "mdagents"
    route_fell_back: bool = False
    complexity_reason: str = ""
    teams: list[MdagentsTeam] = Field(default_factory=list)
    variant: str | None = None


class ZeroShotRecord(SystemRecord):
    """``zero_shot``: one answer, no team."""

    system: Literal["zero_shot"] = "zero_shot"


class CotRecord(SystemRecord):
    """``cot``: one reasoned answer, no team."""

    system: Literal["cot"] = "cot"


class FewShotRecord(SystemRecord):
    """``few_shot``: one answer after worked examples, no team."""

    system: Literal["few_shot"] = "few_shot"


class AdaptiveStage(_Frozen):
    """One stage of ``adaptive``: who (``single`` or ``team``), its answer, and what it spent."""

    stage: Literal["single", "team"]
    answer: str | None = None
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0


class AdaptiveRecord(SystemRecord):
    """``adaptive``: the ``stage`` whose answer stands, stage 1's ``signal`` against the
    ``threshold``, each stage's spend, and the ``team`` configuration escalated to."""

    system: Literal["adaptive"] = "adaptive"
    stage: Literal["single", "team"]
    signal: float
    threshold: float
    samples: int = 1
    stages: list[AdaptiveStage] = Field(default_factory=list)
    team: str = ""


Record: TypeAlias = Deliberation | PeerRecord
"""One system's record: its registered model (`teammed.systems`), tagged by ``system``."""


class ResultRow(BaseModel):
    """One question's outcome: answer or error, accounting and the system's record.

    ``correct`` is null for an unlabeled question (no gold letter): it is answered but left
    out of accuracy and calibration. A failed row has ``failed`` true, ``prediction`` null
    and ``error`` naming why (``error_type``/``error_kind`` classify it). Token and cost
    fields are *billable* (what the backend would charge, cache or not); ``spent_*`` is what
    this session actually paid. ``cached_prompt_tokens`` is the part of ``prompt_tokens`` the
    provider reported as served from its prompt cache (0 in rows written before it was recorded).
    ``record`` is the system's typed `Record` (None: no record, or a system without a model, whose
    record is ``custom_record`` as it wrote it); ``transcript`` its `TranscriptEvent` list.
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
    confidence: Confidence | None = None
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
    record: SerializeAsAny[BaseModel] | None = None  # a `Record`, typed by the row's system (_nulls_and_ids)
    custom_record: dict[str, Any] | None = None
    transcript: list[TranscriptEvent] = Field(default_factory=list)
    meta: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _nulls_and_ids(cls, data: Any) -> Any:
        """A null container reads as empty and a numeric id as text: what other tools write."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if not data.get("record"):  # null or {}: no record
            data["record"] = None
        elif not isinstance(data["record"], BaseModel):
            system = data["record"].get("system") if isinstance(data["record"], Mapping) else None
            try:
                data["record"] = typed_record(data["record"], system=data.get("system"))
            except ValidationError as exc:
                raise ValueError(f"the {system or data.get('system')} record does not match its model: "
                                 f"{exc.errors()[0]['loc']}: {exc.errors()[0]['msg']}") from None
            if data["record"] is None:
                raise ValueError(f"record: no model is registered for system {system or data.get('system')!r} "
                                 f"(teammed.systems); a system without one writes custom_record")
        for key, empty in (("transcript", []), ("options", {}), ("roles", []), ("meta", {}),
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


def _is_typed(value: Any) -> bool:
    """Whether ``value`` is a record of its system's registered model."""
    model = record_model(getattr(value, "system", None)) if isinstance(value, BaseModel) else None
    return model is not None and isinstance(value, model)


def typed_record(value: Any, *, system: str | None) -> Record | None:
    """The program's record as its system's model: a model already typed is kept, a dict is
    validated into the registered model (`teammed.systems`) of its ``system`` key, else of ``system``;
    None for no record (empty or null) or a system without a model. Raises `ValidationError` for a
    record its model refuses (a system writing a key its model does not declare)."""
    if _is_typed(value):
        return value
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    if not isinstance(value, Mapping) or not value:
        return None
    name = value.get("system") if isinstance(value.get("system"), str) else system
    model = record_model(name)
    if model is None:
        return None
    return model.model_validate({**value, "system": name})


def read_record(value: Any, *, answer: str | None = None,
                system: str | None = None) -> Deliberation | PeerRecord | None:
    """A record of an older or unknown shape, read leniently (the legacy reader's, GEPA feedback's and
    ``ask``'s view of a program's record): a typed record is kept; a dict is typed by its ``system``
    key, else ``system``: teamwork as a `Deliberation` (salvaged field by field when it is of an older
    shape), a peer system as its model (keys it does not know left out, values that do not validate
    dropped); a record of an unknown system reads as a teamwork-shaped `Deliberation`, else as the
    shared `PeerRecord` keys. None for no record or one none of these reads.

    A teamwork record written before the record kept its ``answer`` (record version 1, the same
    keys otherwise) reads as a `Deliberation` answering ``answer`` (the row's prediction), when given.
    """
    if isinstance(value, Deliberation | PeerRecord):
        return value
    if not isinstance(value, Mapping) or not value:
        return None
    name = value.get("system") if isinstance(value.get("system"), str) else system
    model = record_model(name)
    if model is not None and name != "teamwork":
        return _salvage_peer(model, value)
    if name == "teamwork" or _TEAMWORK_KEYS <= set(value):
        if answer is not None and "answer" not in value:
            value = {**value, "answer": answer}
        try:
            return Deliberation.model_validate(value)
        except ValidationError:
            return _salvage_deliberation(value, answer)
    try:
        return PeerRecord.model_validate(value)
    except ValidationError:
        return None


def _salvage_peer(model: type[SystemRecord], value: Mapping[str, Any]) -> PeerRecord | None:
    """A peer system's stored record as its model: the keys the model declares, less those whose
    values do not validate (each tried once); None when even that does not validate."""
    data = {k: v for k, v in value.items() if k in model.model_fields and k != "system"}
    while True:
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            bad = {e["loc"][0] for e in exc.errors() if e["loc"] and e["loc"][0] in data}
            if not bad:
                return None
            for key in bad:
                data.pop(key)


_TEAMWORK_KEYS = frozenset({"agents", "r2", "final", "scores", "aggregation"})  # no peer record has them all


def _salvage_deliberation(value: Mapping[str, Any], answer: str | None) -> Deliberation | None:
    """A teamwork record of an older or damaged shape, read field by field: unknown keys are left out,
    a list keeps the entries that validate, a missing or unreadable field takes its empty value,
    and the answer is the record's, else the row's prediction, else the top Borda score. None when
    the record is not teamwork-shaped or still does not validate."""
    from pydantic import OnErrorOmit, TypeAdapter

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
                if get_origin(annotation) is list and isinstance(raw, list):  # the entries that validate
                    entries: Any = list[OnErrorOmit[get_args(annotation)[0]]]  # type: ignore[misc,valid-type]
                    data[name] = TypeAdapter(entries).validate_python(raw)
                    continue
        if field.is_required():
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
    """A `ResultRow` from a decoded JSON line; rows of schema versions 1 and 2 go through the legacy
    reader (`_upgrade_legacy`).

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
        data = _upgrade_legacy(data, version, where)
    try:
        return ResultRow.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(map(str, first["loc"]))
        raise DataError(f"{where} is not a valid result row ({field}: {first['msg']}); fix or remove "
                        f"that line") from None


def iter_rows(path: Path, *, fix: str = "fix or remove that line", warn: bool = True,
              ids: Container[str] | None = None) -> Iterator[tuple[ResultRow, bytes]]:
    """Each row of a ``results.jsonl`` with its stored line, read one line at a time (the one reader
    of result files: the runner's resume and the report both read through it).

    A last line without its newline that is not valid JSON is a torn write (a crash mid-line): it
    is left out with a warning (``warn``; ``--resume`` cuts it). A last line that is valid JSON
    counts, newline or not. Any other unreadable line is a `DataError` naming the file, the line
    and ``fix``. With ``ids``, only the rows whose id is among them are typed and yielded (the
    others are decoded, not validated).
    """
    with Path(path).open("rb") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
            except json.JSONDecodeError as exc:
                if not line.endswith(b"\n"):
                    if warn:
                        logger.warning("%s: ignoring a torn last line (the run was interrupted; --resume cuts it)",
                                       path)
                    return
                raise DataError(f"{path}:{number} is not valid JSON ({exc.msg}); {fix}") from None
            if ids is not None and isinstance(data, dict) and str(data.get("id")) not in ids:
                continue
            yield load_row(data, where=f"{path}:{number}"), line


def load_rows(run_dir: Path | str) -> list[ResultRow]:
    """The typed rows of a run directory's ``results.jsonl`` (or of that file, given it), in order."""
    path = Path(run_dir)
    if path.is_dir():
        path = path / "results.jsonl"
    return [row for row, _ in iter_rows(path)]


def _upgrade_legacy(data: dict[str, Any], version: int, where: str) -> dict[str, Any]:
    """The one legacy reader: a row of schema version 1 or 2 in the version-3 form.

    Version 1 (no ``schema_version``): an unlabeled question was scored wrong then. Both versions:
    the dict record is typed by the row's ``system`` (`read_record`); one of a system without a
    model is kept as ``custom_record``; one that does not validate becomes None (logged, and the
    row marked ``legacy_record_unread``). A confidence other than High/Medium/Low reads as None, a
    transcript entry that is not an event is left out.
    """
    row = _version_one(data) if version < 2 else dict(data)
    row["schema_version"] = SCHEMA_VERSION
    row["legacy_schema_version"] = version
    _upgrade_record(row, where)
    confidence = row.get("confidence")
    confidence = confidence.strip().capitalize() if isinstance(confidence, str) else None
    row["confidence"] = confidence if confidence in _CONFIDENCES else None
    transcript = row.get("transcript")
    row["transcript"] = [e for e in transcript if isinstance(e, Mapping)] if isinstance(transcript, list) else []
    return row


def _version_one(data: dict[str, Any]) -> dict[str, Any]:
    """A version-1 row with its nulls dropped, ``labeled`` set and an unlabeled question no longer wrong."""
    row = {k: v for k, v in data.items() if v is not None or k in ("gold", "prediction", "error")}
    labeled = "gold" not in data or data["gold"] is not None
    row["labeled"] = labeled
    row["correct"] = bool(data.get("correct")) if labeled else None
    for key in ("seed", "n_agents"):
        if key in row and not isinstance(row[key], int):
            row[key] = None
    return row


def _upgrade_record(row: dict[str, Any], where: str) -> None:
    """A legacy row's dict record typed by its system, kept as ``custom_record`` (a system without a
    model) or dropped (it does not validate: logged, and the row marked ``legacy_record_unread``)."""
    raw = row.get("record")
    system = row.get("system") if isinstance(row.get("system"), str) else None
    prediction = row.get("prediction") if isinstance(row.get("prediction"), str) else None
    found = read_record(raw, answer=prediction, system=system)
    if _is_typed(found):
        row["record"] = found
        return
    row["record"] = None
    if isinstance(raw, Mapping) and raw:
        if found is not None:  # the shared keys of a system without a model: kept as it wrote them
            row["custom_record"] = dict(raw)
        else:
            logger.warning("%s: its %s record does not validate; read without a record", where,
                           system or "unknown system's")
            row["legacy_record_unread"] = True
