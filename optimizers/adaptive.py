"""Tune the adaptive system (`teammed.programs.peers.adaptive`) on the accuracy-cost front (docs/adaptive.md).

`measure` (tuning questions) and `prove` (held-out questions) call a model; `front`, `choose`, `candidates`,
`reference` and `loss_bound` are pure functions over the measured `Outcome` table, where any (threshold,
target) point's outcome on a question follows exactly (kept: the single agent's; escalated: the team's, at
both stages' cost). A failed question counts as wrong, with what it spent.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from teammed.config import TeamworkConfig

__all__ = ["Outcome", "Point", "Front", "Proof", "measure", "front", "choose", "prove", "point_of", "candidates",
           "reference", "loss_bound", "clopper_pearson", "policy_threshold", "ALWAYS", "front_markdown"]

ALWAYS = 1.01  # a threshold above every signal: always escalate


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class Outcome(_Frozen):
    """One tuning question: the single agent's signal (None: stage 1 failed, so the question fails
    whatever the threshold, as the adaptive system fails it), whether each stage was right, and its tokens."""

    id: str
    signal: float | None
    single_correct: bool
    single_tokens: int
    team_correct: dict[str, bool]
    team_tokens: dict[str, int]


class Point(_Frozen):
    """A policy and what it scored on the tuning questions. ``target`` is a team label; a static
    point (``static``) runs that team alone, ``target`` None is the single agent alone."""

    threshold: float | None
    target: str | None
    static: bool = False
    accuracy: float
    tokens: float  # billable tokens per question
    escalation_rate: float

    def label(self) -> str:
        if self.target is None:
            return "single agent"
        if self.static:
            return f"static {self.target}"
        return f"adaptive -> {self.target} below {self.threshold:g}"


class Front(_Frozen):
    """Every point the study scored, its Pareto front, and the static references."""

    points: list[Point]
    pareto: list[Point]
    statics: list[Point]
    single: Point
    best_static: Point


def _cells(outcomes: Sequence[Outcome], threshold: float | None, target: str | None,
           static: bool = False) -> list[tuple[bool, int, bool]]:
    """Each question's (right, tokens, escalated) under a policy: ``target`` alone (``static``), the single agent
    (``target`` None), or escalation to ``target`` below ``threshold``."""
    cells = []
    for o in outcomes:
        if static and target is not None:
            cells.append((o.team_correct[target], o.team_tokens[target], True))
        elif o.signal is None:  # stage 1 failed: the question fails, the team is never asked
            cells.append((False, o.single_tokens, False))
        elif target is None or threshold is None or o.signal >= threshold:
            cells.append((o.single_correct, o.single_tokens, False))
        else:
            cells.append((o.team_correct[target], o.single_tokens + o.team_tokens[target], True))
    return cells


def _point(cells: Sequence[tuple[bool, int, bool]], **policy: Any) -> Point:
    """``policy`` with what it scored from each question's (right, tokens, escalated)."""
    n = len(cells)
    return Point(**policy, accuracy=sum(c[0] for c in cells) / n, tokens=sum(c[1] for c in cells) / n,
                 escalation_rate=sum(c[2] for c in cells) / n)


def point_of(outcomes: Sequence[Outcome], threshold: float, target: str) -> Point:
    return _point(_cells(outcomes, threshold, target), threshold=threshold, target=target)


def front(outcomes: Sequence[Outcome], *, seed: int = 0) -> Front:
    """The Optuna multi-objective study over (threshold, target) and its Pareto front."""
    import optuna

    if not outcomes:
        raise ValueError("the front needs tuning questions")
    targets = sorted(outcomes[0].team_correct)
    thresholds = sorted({o.signal for o in outcomes if o.signal is not None} | {ALWAYS})  # each split, and always
    space: dict[str, Sequence[str | float]] = {"threshold": thresholds, "target": targets}
    quiet = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    scored: dict[tuple[float, str], Point] = {}

    def objective(trial: Any) -> tuple[float, float]:
        key = (trial.suggest_categorical("threshold", thresholds), trial.suggest_categorical("target", targets))
        scored[key] = point = point_of(outcomes, *key)
        return point.accuracy, point.tokens

    try:
        study = optuna.create_study(directions=["maximize", "minimize"],
                                    sampler=optuna.samplers.GridSampler(space, seed=seed))
        study.optimize(objective, n_trials=len(thresholds) * len(targets))
    finally:
        optuna.logging.set_verbosity(quiet)
    pareto = sorted({(t.params["threshold"], t.params["target"]) for t in study.best_trials})
    statics = [_point(_cells(outcomes, None, t, static=True), threshold=None, target=t, static=True) for t in targets]
    best = max(statics, key=lambda p: (p.accuracy, -p.tokens))
    single = _point(_cells(outcomes, None, None), threshold=None, target=None)
    return Front(points=[scored[k] for k in sorted(scored)], pareto=sorted((scored[k] for k in pareto),
                                                                             key=lambda p: p.tokens),
                 statics=statics, single=single, best_static=best)


def clopper_pearson(x: int, n: int, alpha: float) -> tuple[float, float]:
    """Exact one-sided ``1 - alpha`` bounds of a binomial share from ``x`` of ``n``: ``(lower, upper)``, each
    holding with probability at least ``1 - alpha`` whatever the true share (Clopper-Pearson: beta quantiles)."""
    if n <= 0 or not 0 <= x <= n or not 0 < alpha < 1:
        raise ValueError(f"need 0 <= x <= n, n > 0 and alpha in (0, 1) (got x={x}, n={n}, alpha={alpha})")
    import scipy.stats  # here, not at import: 0.8 s that only the bound needs

    lower = 0.0 if x == 0 else float(scipy.stats.beta.ppf(alpha, x, n - x + 1))  # P(X >= x) = alpha
    upper = 1.0 if x == n else float(scipy.stats.beta.ppf(1 - alpha, x + 1, n - x))  # P(X <= x) = alpha
    return lower, upper


def loss_bound(outcomes: Sequence[Outcome], point: Point, static: Point, *, alpha: float = 0.10) -> float:
    """An exact one-sided ``1 - alpha`` upper bound on ``static``'s accuracy minus ``point``'s (a share): the
    Clopper-Pearson upper bound of ``p_c`` (only ``static`` right) minus the lower bound of ``p_b`` (only
    ``point`` right), each at ``alpha / 2``; valid with no discordant pair (docs/adaptive.md)."""
    from teammed.evals.stats import discordant

    ours, theirs = ([c[0] for c in _cells(outcomes, p.threshold, p.target, p.static)] for p in (point, static))
    b, c = discordant(list(zip(ours, theirs, strict=True)))
    return clopper_pearson(c, len(ours), alpha / 2)[1] - clopper_pearson(b, len(ours), alpha / 2)[0]


def reference(found: Front) -> Point:
    """What the choice must not lose against: the best static team, or the single agent when it is strictly
    more accurate than every team (in a tie it is a candidate like any cheaper policy)."""
    return found.single if found.single.accuracy > found.best_static.accuracy else found.best_static


def candidates(found: Front) -> list[Point]:
    """What may replace the `reference`, cheapest first: the single agent and every cheaper adaptive point that
    escalates some question (one that escalates none is the single agent again, and would only widen the
    correction)."""
    ref = reference(found)
    escalating = [p for p in found.points if p.escalation_rate > 0]
    cheaper = [p for p in [found.single, *escalating] if p.tokens < ref.tokens and p != ref]
    return sorted(cheaper, key=lambda p: (p.tokens, -p.accuracy))


def choose(outcomes: Sequence[Outcome], found: Front, *, tolerance: float = 0.01, alpha: float = 0.10,
           max_cost_ratio: float | None = None) -> Point:
    """The operating point: with ``max_cost_ratio`` r, the most accurate point costing at most r times the best
    static team; else the cheapest of `candidates` whose `loss_bound` against the `reference`, at ``alpha / m``
    for the ``m`` candidates (Bonferroni), is within ``tolerance``, and the reference when none is."""
    best = found.best_static
    if max_cost_ratio is not None:
        affordable = [p for p in [found.single, *found.points] if p.tokens <= max_cost_ratio * best.tokens]
        if not affordable:
            raise ValueError(f"no point costs at most {max_cost_ratio:g} x the best static configuration "
                             f"({best.tokens:.0f} tokens a question); the cheapest costs "
                             f"{min(p.tokens for p in found.points) / best.tokens:.2f} x")
        return max(affordable, key=lambda p: (p.accuracy, -p.tokens))
    ref, pool = reference(found), candidates(found)
    each = alpha / max(1, len(pool))
    return next((p for p in pool if loss_bound(outcomes, p, ref, alpha=each) <= tolerance), ref)


def policy_threshold(point: Point) -> float:
    """The `AdaptiveTeam` threshold that runs ``point``: always escalate for a static team, never for the
    single agent, else the point's own."""
    if point.static:
        return ALWAYS
    if point.target is None:
        return 0.0
    assert point.threshold is not None
    return point.threshold


def _program(target: Any) -> Any:
    """A target as a program: a configuration's `TeamworkProgram`, or the (compiled) program given."""
    from teammed.programs.teamwork import TeamworkProgram

    return TeamworkProgram(target) if isinstance(target, TeamworkConfig) else target


def measure(questions: Sequence[Any], lm: Any, targets: Mapping[str, Any], *, samples: int = 1,
            on_question: Callable[[int, int], None] | None = None) -> list[Outcome]:
    """Stage 1 and every target (a `TeamworkConfig` or a teamwork program) on each question
    (tuning questions only: the caller's split)."""
    from teammed.optimizers._scoring import score_questions, tokens_of
    from teammed.programs.peers.adaptive import AdaptiveTeam

    single = AdaptiveTeam(threshold=0.0, samples=samples)
    teams = {label: _program(target) for label, target in targets.items()}
    outcomes = []
    for i, question in enumerate(questions):
        [row] = score_questions(single, [question], lm)
        scored = {label: score_questions(program, [question], lm)[0] for label, program in teams.items()}
        outcomes.append(Outcome(id=question.id, signal=None if row.failed else float(row.record.signal),
                                single_correct=bool(row.correct) and not row.failed, single_tokens=tokens_of(row),
                                team_correct={label: bool(r.correct) for label, r in scored.items()},
                                team_tokens={label: tokens_of(r) for label, r in scored.items()}))
        if on_question is not None:
            on_question(i + 1, len(questions))
    return outcomes


class Proof(_Frozen):
    """Held-out accuracy and tokens of the chosen point, the best static configuration and the
    single agent, paired (McNemar's p of chosen against static and against single)."""

    n: int
    chosen: Point
    static: Point
    single: Point
    p_vs_static: float
    p_vs_single: float


def prove(questions: Sequence[Any], lm: Any, chosen: Point, targets: Mapping[str, Any], static_target: str) -> Proof:
    """Run the chosen policy, the best static team and the single agent on held-out questions."""
    from teammed.evals.stats import discordant, mcnemar
    from teammed.optimizers._scoring import score_questions, tokens_of
    from teammed.programs.peers.adaptive import AdaptiveTeam

    def run(program: Any) -> list[tuple[bool, int, bool]]:
        return [(bool(row.correct) and not row.failed, tokens_of(row),
                 not row.failed and getattr(row.record, "stage", "team") == "team")
                for row in score_questions(program, questions, lm)]

    if chosen.target is None:
        mine = run(AdaptiveTeam(threshold=0.0))
    elif chosen.static:
        mine = run(_program(targets[chosen.target]))
    else:
        mine = run(AdaptiveTeam(_program(targets[chosen.target]), threshold=policy_threshold(chosen)))
    static = run(_program(targets[static_target]))
    single = run(AdaptiveTeam(threshold=0.0))

    def p_value(a: list[tuple[bool, int, bool]], b: list[tuple[bool, int, bool]]) -> float:
        return mcnemar(*discordant([(x[0], y[0]) for x, y in zip(a, b, strict=True)]))

    return Proof(n=len(questions), chosen=_point(mine, threshold=chosen.threshold, target=chosen.target,
                                                 static=chosen.static),
                 static=_point(static, threshold=None, target=static_target, static=True),
                 single=_point(single, threshold=None, target=None),
                 p_vs_static=p_value(mine, static), p_vs_single=p_value(mine, single))


def front_markdown(found: Front, chosen: Point | None = None) -> str:
    """The front as a table: each Pareto point, the statics and the single agent, tokens as a share
    of the best static configuration's."""
    base = found.best_static.tokens or 1.0
    lines = ["| policy | accuracy | tokens / question | of best static | escalated |", "|---|---|---|---|---|"]
    for p in [found.single, *found.pareto, *found.statics]:
        mark = " **(chosen)**" if chosen is not None and p == chosen else ""
        lines.append(f"| {p.label()}{mark} | {100 * p.accuracy:.1f}% | {p.tokens:,.0f} | {p.tokens / base:.2f} | "
                     f"{100 * p.escalation_rate:.0f}% |")
    return "\n".join(lines)
