"""Answer options as every system takes them: a mapping A, B, C, ... to non-empty text."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from teammed.errors import ConfigError
from teammed.types import LETTERS

__all__ = ["validated_options"]

def validated_options(options: Any) -> dict[str, str]:
    """``options`` as a plain dict, or `ConfigError` naming the offending option and the fix.

    Options must be keyed by the letters A, B, C, ... in order (2 to 10 of them) and every
    text must be non-empty: ``{"E": None}``, NaN (a missing option read from a table) or blank
    text is refused rather than ranked and scored.
    """
    if not isinstance(options, Mapping):
        raise ConfigError(f"options must be a mapping of letters to texts, e.g. {{'A': 'Aspirin', 'B': 'Heparin'}} "
                          f"(got {type(options).__name__})")
    keys = [str(k) for k in options]
    if len(keys) < 2:
        raise ConfigError(f"a question needs at least two options (got {len(keys)}: {keys}); add the missing options")
    if len(keys) > len(LETTERS):
        raise ConfigError(f"a question takes at most {len(LETTERS)} options (got {len(keys)})")
    expected = list(LETTERS[: len(keys)])
    if keys != expected:
        raise ConfigError(f"options must be lettered {', '.join(expected)} in order (got {', '.join(keys)}); "
                          f"re-letter them")
    cleaned: dict[str, str] = {}
    for letter, text in options.items():
        # None, NaN (an empty table cell) or blank text; the text "None" is a legitimate option
        if text is None or isinstance(text, float) and math.isnan(text) or not str(text).strip():
            raise ConfigError(f"option {letter} is empty ({text!r}); give it a text or drop it and re-letter "
                              f"the options")
        cleaned[str(letter)] = str(text).strip()
    return cleaned
