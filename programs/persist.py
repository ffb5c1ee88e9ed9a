"""`SavesConfig`: ``save``/``load`` of teammed programs in DSPy's own format, plus the config.

``program.save("p.json")`` writes what ``dspy.Module.save`` writes (one entry per
predictor and DSPy's ``metadata``) and a ``"teammed"`` entry with the system, config and
``meta`` that ``teammed run --program p.json`` reads. ``program.load(path)`` is DSPy's,
with a check first: a file compiled for other components or other behaviours raises
`ProgramMismatchError` naming both instead of a bare ``KeyError``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["SavesConfig"]


class SavesConfig:
    """Mixin for a `dspy.Module` (put it first in the bases)."""

    def save(self, path: Any, save_program: bool = False, modules_to_serialize: Any = None, *,
             meta: dict[str, Any] | None = None) -> Any:
        if save_program or Path(path).suffix != ".json":
            return super().save(path, save_program=save_program,  # type: ignore[misc]
                                modules_to_serialize=modules_to_serialize)
        from teammed.optimizers.saved import save_program as write

        write(self, path, meta=meta)  # type: ignore[arg-type]
        return None

    def load_state(self, state: Any, *, allow_unsafe_lm_state: bool = False) -> Any:
        from teammed.optimizers.saved import check_state

        check_state(self, state)  # type: ignore[arg-type]
        return super().load_state(state, allow_unsafe_lm_state=allow_unsafe_lm_state)  # type: ignore[misc]
