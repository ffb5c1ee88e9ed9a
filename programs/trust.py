"""The trust network's arithmetic (pure functions).

Trust lives in [0.4, 1.0] and starts at 0.8. After round 2 each agent's trust moves toward
the quality of its assessment by an exponential moving average; each mutual-monitoring
challenge then nudges the challenged agent's trust by the verdict on its reply.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = [
    "TRUST_DEFAULT",
    "TRUST_MIN",
    "TRUST_MAX",
    "EMA_ALPHA",
    "VERDICT_DELTA",
    "clamp_trust",
    "initial_trust",
    "ema_update",
    "verdict_update",
    "automated_quality",
    "apply_quality",
]

TRUST_DEFAULT = 0.8
TRUST_MIN = 0.4
TRUST_MAX = 1.0
EMA_ALPHA = 0.7
VERDICT_DELTA = {"strong": 0.05, "weak": -0.05, "disputed": -0.02}


def clamp_trust(value: float) -> float:
    return min(TRUST_MAX, max(TRUST_MIN, value))


def initial_trust(agent_ids: Sequence[str]) -> dict[str, float]:
    return {agent: TRUST_DEFAULT for agent in agent_ids}


def ema_update(old: float, quality: float, alpha: float = EMA_ALPHA) -> float:
    """``alpha * old + (1 - alpha) * quality``, clamped to the trust range."""
    quality = min(1.0, max(0.0, quality))
    return clamp_trust(alpha * old + (1 - alpha) * quality)


def verdict_update(old: float, verdict: str) -> float:
    """Trust after a challenge: strong +0.05, weak -0.05, disputed -0.02, clamped."""
    if verdict not in VERDICT_DELTA:
        raise ValueError(f"verdict must be one of {sorted(VERDICT_DELTA)} (got {verdict!r})")
    return clamp_trust(old + VERDICT_DELTA[verdict])


def automated_quality(*, ranking_repaired: bool, n_facts: int, justification: str, confidence: str) -> float:
    """Quality of a round-2 assessment when no leader grades it: four equal checks.

    A complete ranking that needed no repair; two to five facts; a justification of at
    least 40 characters; a confidence of High or Medium (``Low`` is also the parser's
    fallback, so it earns nothing).
    """
    checks = (
        not ranking_repaired,
        2 <= n_facts <= 5,
        len(justification.strip()) >= 40,
        confidence in ("High", "Medium"),
    )
    return sum(checks) / len(checks)


def apply_quality(trust: Mapping[str, float], quality: Mapping[str, float]) -> dict[str, float]:
    """The post-round-2 update of every agent with a quality score (others unchanged)."""
    return {agent: ema_update(score, quality[agent]) if agent in quality else score
            for agent, score in trust.items()}

