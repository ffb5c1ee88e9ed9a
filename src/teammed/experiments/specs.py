"""What an experiment is: frozen specs, one per command, built by the CLI from its flags or by hand.

Every spec is a frozen pydantic model whose fields carry the CLI's defaults, so
``RunSpec(data="demo", team="all", backend="scripted")`` is ``teammed run --dataset demo
--preset all --model scripted``. Three parts recur: `DataSpec` (which questions), `TeamSpec`
(which system, in which configuration) and `BackendSpec` (which model, how it is called).
A string stands for the part's main field: ``data="medqa"``, ``team="all"`` (a preset),
``backend="openai/gpt-4o-mini"``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from teammed import inputs
from teammed.config import TeamworkConfig
from teammed.types import Question

__all__ = ["DataSpec", "TeamSpec", "BackendSpec", "RunSpec", "AskSpec", "CompileSpec", "SearchSpec", "TuneSpec",
           "ReproduceSpec", "ReportSpec", "OPTIMIZERS"]

OPTIMIZERS = ("labeled", "bootstrap", "random-search", "mipro", "gepa")
TeamAgents = Literal["auto", 2, 3, 4]
_SpecT = TypeVar("_SpecT", bound="_Spec")


def checked(cls: type[_SpecT], spec: Any) -> _SpecT:
    """``spec`` as a ``cls``: the spec itself, or a mapping of its fields validated into one (as the flags
    are); anything else is refused naming what to pass."""
    from collections.abc import Mapping

    if isinstance(spec, cls):
        return spec
    if isinstance(spec, Mapping):
        return cls.model_validate(dict(spec))
    raise TypeError(f"expected a {cls.__name__} (or a mapping of its fields), got {type(spec).__name__}; build one "
                    f"with teammed.experiments.{cls.__name__}(...)")


def _unique_seeds(value: tuple[int, ...]) -> tuple[int, ...]:
    twice = sorted({s for s in value if value.count(s) > 1})
    if twice:
        raise ValueError(f"seeds {', '.join(map(str, twice))} named twice; list each seed once")
    if not value:
        raise ValueError("no seed given; give at least one, e.g. (111, 222, 333)")
    return value


def _program(value: Any) -> Any:
    from teammed.programs.teamwork import TeamworkProgram

    if value is not None and not isinstance(value, TeamworkProgram):
        raise ValueError(f"module takes a (compiled) TeamworkProgram, not a {type(value).__name__}: run writes "
                         f"the typed rows of teammed's own systems; evaluate another dspy.Module with "
                         f"dspy.Evaluate, or name a system (system=...)")
    return value


def _coerce(field: str) -> BeforeValidator:
    """A string stands for the part's main ``field``."""
    return BeforeValidator(lambda value: {field: value} if isinstance(value, str) else value)


def check_budget(raw: str) -> str:
    """A budget: ``calls=N``, ``tokens=N`` and/or ``usd=X``, comma-separated (a `ConfigError` otherwise)."""
    from teammed.optimizers.tune_queue import parse_budget

    parse_budget(raw)
    return raw


_Seeds = Annotated[tuple[int, ...], AfterValidator(_unique_seeds)]
_Storage = Annotated[str, AfterValidator(inputs.storage_url)]
_Budget = Annotated[str, AfterValidator(check_budget)]
_Shard = Annotated[tuple[int, int], BeforeValidator(lambda v: inputs.shard(v if isinstance(v, str) else tuple(v)))]
_Agents = Annotated[TeamAgents, BeforeValidator(lambda v: int(v) if isinstance(v, str) and v.isdigit() else v)]


def _masked(value: Any) -> Any:
    from teammed.redact import redact

    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: _masked(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_masked(v) for v in value)
    return value


class _Spec(BaseModel):
    """A spec never shows a credential: its repr, its dumps and its validation errors mask URL passwords and
    keys (`teammed.redact.redact`); the fields themselves keep the values the backend needs."""

    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True, allow_inf_nan=False)

    @model_serializer(mode="wrap")
    def _dump_masked(self, handler: SerializerFunctionWrapHandler) -> Any:
        return _masked(handler(self))

    def __repr_args__(self) -> Any:
        for name, value in super().__repr_args__():
            yield name, _masked(value)


class DataSpec(_Spec):
    """Which questions: a benchmark name, a data file or a Hugging Face directory, and its split."""

    dataset: str
    data_dir: Path | None = None
    dataset_name: str | None = None  # the name results carry (default: the registry name or the file's stem)
    # questions a caller holds (``data=[Question, ...]``): used instead of loading ``dataset``, which names them
    questions: tuple[Question, ...] | None = None
    split: str | None = None  # see `teammed.data.splits.plan_split` (default: the purpose's part)
    revision: str | None = None  # a Hugging Face hub revision


class TeamSpec(_Spec):
    """Which system, in which configuration: a preset, components, a config file or a compiled program."""

    system: Annotated[str, AfterValidator(inputs.system_name)] = "teamwork"
    preset: Annotated[str, AfterValidator(inputs.preset_name)] | None = None
    # `run` only: a grid of presets
    presets: Annotated[tuple[str, ...], AfterValidator(lambda v: tuple(map(inputs.preset_name, v)))] | None = None
    components: str | None = None  # "smm,leadership,..."
    config: Path | None = None  # a TeamworkConfig JSON or a Special Set file
    n_agents: _Agents | None = None
    n_turns: int | None = Field(default=None, ge=1)
    early_consensus: float | None = None
    leader_correction: bool | None = None
    program: Path | None = None  # a compiled program (`compile`)
    escalate_below: float | None = Field(default=None, ge=0.0, le=1.01)  # `adaptive` only: its threshold
    # objects a caller holds: a configuration, or a (compiled) teamwork program (never dumped: not JSON)
    teamwork: TeamworkConfig | None = None
    module: Annotated[Any, AfterValidator(_program)] = Field(default=None, exclude=True)


class BackendSpec(_Spec):
    """Which model(s) and how every call is made (the CLI's backend flags)."""

    # litellm model strings, `local` (default) or `scripted`; a string is one model
    model: Annotated[tuple[str, ...], BeforeValidator(lambda v: (v,) if isinstance(v, str) else v),
                     AfterValidator(lambda v: tuple(map(inputs.model_string, v)))] | None = None
    lm: Any = Field(default=None, exclude=True)  # a `dspy.BaseLM` the caller holds, called as it is
    api_base: Annotated[str, AfterValidator(inputs.api_base)] | None = None
    deployments: Path | None = None  # a litellm Router model_list file (replaces model)
    concurrency: int = Field(default=4, ge=1)  # questions in flight
    max_parallel_requests: int | None = Field(default=None, ge=1)
    structured_output: str = "auto"
    timeout: float | None = Field(default=None, gt=0)
    max_tokens: int = Field(default=512, ge=1)
    temperature: float = Field(default=0.0, ge=0)
    retry_attempts: int = Field(default=4, ge=1)
    retry_base: float = Field(default=2.0, ge=0)
    retry_cap: float = Field(default=30.0, ge=0)
    transport: Literal["auto", "litellm"] = "auto"
    cache: bool = True
    cache_dir: Path | None = None

    @property
    def models(self) -> tuple[str, ...]:
        """The model strings called (``local`` when none is given and there is no deployments file)."""
        return self.model or (() if self.deployments else ("local",))


def _lm(value: Any) -> Any:
    import dspy

    return {"lm": value} if isinstance(value, dspy.BaseLM) else value


def _questions(value: Any) -> Any:
    if isinstance(value, list | tuple) and value and all(isinstance(q, Question) for q in value):
        return {"dataset": "questions", "questions": tuple(value)}
    return value


def _held(value: Any) -> Any:
    import dspy

    if isinstance(value, TeamworkConfig):
        return {"teamwork": value}
    return {"module": value} if isinstance(value, dspy.Module) else value


class _Experiment(_Spec):
    backend: Annotated[BackendSpec, _coerce("model"), BeforeValidator(_lm)] = BackendSpec()


class _OnData(_Experiment):
    data: Annotated[DataSpec, _coerce("dataset"), BeforeValidator(_questions)]


class _WithTeam(_OnData):
    team: Annotated[TeamSpec, _coerce("preset"), BeforeValidator(_held)] = TeamSpec()


class RunSpec(_WithTeam):
    """``teammed run``: a system over a data set, one run directory per configuration and seed."""

    n: int | None = Field(default=None, ge=1)  # questions to sample (None: all)
    seed: int = 111
    seeds: _Seeds | None = None  # a grid of sampling seeds (default: seed)
    stratify: str | None = None
    shard: _Shard | None = None  # (I, N) or "I/N": the I-th of N disjoint parts
    shuffle_options: bool = False
    out: Path | None = None  # default runs/<time>-<dataset>/<label>/seed<seed>
    resume: bool = False
    retry_failed: bool = False
    max_consecutive_failures: int = Field(default=5, ge=0)
    allow_overlap: bool = False


class AskSpec(_Experiment):
    """``teammed ask``: one question, typed in (``question`` and ``options``) or replayed from a data set
    (``data`` and ``question_id``)."""

    question: str | None = None
    options: dict[str, str] | None = None
    image: str | None = None
    data: Annotated[DataSpec, _coerce("dataset")] | None = None
    question_id: str | None = None
    team: Annotated[TeamSpec, _coerce("preset")] = TeamSpec()


class CompileSpec(_WithTeam):
    """``teammed compile``: optimize a system's prompts with a DSPy optimizer; prove it on held-out questions."""

    optimizer: Literal["labeled", "bootstrap", "random-search", "mipro", "gepa"]
    out: Path
    train: int = Field(default=20, ge=1)
    val: int = Field(default=10, ge=0)
    test: int = Field(default=10, ge=0)
    seed: int = 111
    teacher_model: str | None = None
    reflection_model: str | None = None


class SearchSpec(_OnData):
    """``teammed search``: component subsets with Optuna; the Special Set of a data set."""

    n: int = Field(default=20, ge=1)
    trials: int = Field(default=10, ge=1)
    storage: _Storage | None = None
    study: str | None = None
    objectives: Literal["accuracy", "accuracy,tokens"] = "accuracy"
    sampler: Literal["tpe", "grid", "brute"] = "tpe"
    seed: int = 111
    batch_size: int = Field(default=5, ge=1)
    search_turns: bool = False
    search_agents: bool = False
    search_early_consensus: bool = False
    out: Path = Path("special_sets")
    adaptive: bool = False  # then: the adaptive front on the tuning questions, proven on n_eval held-out ones
    max_cost_ratio: float | None = Field(default=None, gt=0.0)
    n_eval: int = Field(default=100, ge=1)

    @model_validator(mode="after")
    def _cost_ratio_needs_adaptive(self) -> SearchSpec:
        if self.max_cost_ratio is not None and not self.adaptive:
            raise ValueError("max_cost_ratio (--max-cost-ratio) chooses the adaptive operating point: add adaptive "
                             "(--adaptive) or leave it out")
        return self


class TuneSpec(_OnData):
    """``teammed tune``: prompts and components together within a budget, proven on held-out questions.
    Settings left None take `teammed.optimizers.tune.TuneSettings`' defaults."""

    budget: _Budget  # calls=N, tokens=N and/or usd=X
    tune_split: str | None = None
    optimizer: Literal["none", "labeled", "bootstrap", "random-search", "mipro", "gepa"] | None = None
    storage: _Storage | None = None
    study: str | None = None
    n_tune: int | None = Field(default=None, ge=1)
    n_eval: int = Field(default=100, ge=1)
    seed: int | None = Field(default=None, ge=0)
    batch_size: int | None = Field(default=None, ge=1)
    stage1_batches: int | None = Field(default=None, ge=1)
    pool_size: int | None = Field(default=None, ge=1)
    alpha: float | None = Field(default=None, gt=0, lt=1)
    out: Path | None = None  # default special_sets/<dataset name>-<hash8>_tune


class ReproduceSpec(_Experiment):
    """``teammed reproduce``: a paper's table, measured, beside the published numbers."""

    protocol: Literal["001-table1", "medagentsbench"] = "001-table1"
    data_dir: Path | None = None
    datasets: tuple[str, ...] | None = None  # codes (MQA, PQA, ...) or files; default all eight
    split: str | None = None  # medagentsbench: default test_hard
    rows: tuple[str, ...] | None = None  # default every row
    seeds: _Seeds = (111, 222, 333)
    n: int | None = Field(default=None, ge=1)  # default: 50 for 001-table1, the whole split for medagentsbench
    published: Path | None = None  # medagentsbench: MedAgentsBench's output/ folder (required)
    published_model: str | None = None  # medagentsbench: whose published outputs (default: the model's name)
    pool_split: str = "test"  # medagentsbench: where Few-Shot and MDAgents draw their worked examples
    storage: _Storage | None = None
    study: str | None = None
    tune_budget: _Budget = "calls=20000"
    optimizer: Literal["none", "labeled", "bootstrap", "random-search", "mipro", "gepa"] = "none"
    batch_size: int = Field(default=10, ge=1)
    out: Path | None = None  # default reproduce/<protocol>


class ReportSpec(_Spec):
    """``teammed report``: tables, tests and plots over run directories (or two of them compared)."""

    dirs: tuple[Path, ...] = Field(min_length=1)  # at least one run directory
    out: Path = Path("report")
    baseline: str | None = None
    compare: bool | str = False  # True: the runs' two configurations; a published method's name or file
    published: Path | None = None  # MedAgentsBench's output/ folder: its published methods beside the runs
    model: str | None = None  # whose published outputs (default: the runs' model, or the folder's only one)
    published_split: str | None = None  # default: the runs' split
