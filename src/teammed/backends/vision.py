"""Whether a deployment's model sees images: checked before a command with image questions spends anything.

teammed's own backends (``local``, ``scripted``, ``simulated``) are text-only; any other model is
asked of litellm's model map (``litellm.supports_vision``), and a model it does not know is taken
as text-only.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from teammed.errors import TeammedError
from teammed.types import Question

if TYPE_CHECKING:
    from teammed.backends.resolve import Deployment

__all__ = ["sees_images", "require_vision"]


def sees_images(deployment: Deployment) -> bool:
    """Whether ``deployment``'s model takes images."""
    if deployment.spec.startswith(("local", "scripted", "simulated")):  # teammed's own: text-only, unknown to
        return False  # litellm (asking litellm about them printed its provider list to the terminal)
    from teammed._litellm import litellm

    try:
        return bool(litellm().supports_vision(model=getattr(deployment.lm, "model", "")))
    except Exception:  # unknown to litellm's model map
        return False


def require_vision(questions: Iterable[Question], deployments: Sequence[Deployment]) -> None:
    """Image questions need a vision model: refuse the first text-only deployment, naming the fix."""
    if not any(q.image for q in questions):
        return
    for d in deployments:
        if not sees_images(d):
            raise TeammedError(
                f"these questions carry images, but {d.spec} is a text-only model; use a vision model "
                f"(e.g. --model openai/gpt-4o); every system shows the image to the model (teamwork: to each clinician "
                f"in round 2)"
            )
