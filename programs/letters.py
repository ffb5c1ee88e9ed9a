"""The one reader of option letters, for every system: teamwork rankings, votes, tie-breaks, peers.

A model asked for an option letter does not always give one. A server that ignores the JSON
schema's enum (llama.cpp, Ollama and some proxies in json mode) writes ``"Answer: C"``,
``"Option C is most likely"``, ``"(c)"``, the option's text, or prose. `letter_of` reads the
letter such a reply *unambiguously* names, and None otherwise; it never guesses:

1. the letter alone, in any case and decorated: ``"C"``, ``"(c)"``, ``"C)"``, ``"C."``, ``"**C**"``;
2. the exact text of one option (case and spacing ignored), e.g. ``"Aortic dissection"``;
3. otherwise the letters the reply names, which must all be one letter: each stand-alone
   capital that is an option letter (``"Definitely C"``, ``"C) Aortic dissection"``), each
   letter after *answer*, *option* or *choice* in any case (``"answer: c"``), and each option
   whose whole text the reply quotes. ``"A or C"``, ``"C) Pulmonary embolism"`` when that is
   option B's text, or ``"A tall man with C"`` name two letters: the reply is ambiguous, None.

Option texts are matched as whole words and taken out of the reply before its capitals are
read, so ``"Vitamin D deficiency"`` quoted as option B's text is B, never D.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ["letter_of"]

_DECORATION = "()[]{}<>.:;,!?-*_\"'`“”‘’ \t\n"
# a stand-alone capital: no letter, digit or apostrophe beside it, and not a prefix such as "C-reactive"
_CAPITAL = re.compile(r"(?<![\w'’])([A-Z])(?![\w'’]|-\w)")
# a letter in any case after answer/option/choice that ends the reply or a clause: "answer: c",
# "option (b)", "the answer is d." (a capital anywhere is read by _CAPITAL; "the answer is a tall man" names none)
_KEYWORD = re.compile(r"\b(?:answer|option|choice)\b(?:\s+is)?\s*[:=\-]?\s*[(\[]?([A-Za-z])(?=\s*$|[)\].,:;!?])",
                      re.IGNORECASE)


def _norm(text: object) -> str:
    return " ".join(str(text).split()).casefold()


def letter_of(raw: object, options: Mapping[str, str]) -> str | None:
    """The option letter ``raw`` unambiguously names, or None (the module docstring gives the rules)."""
    if raw is None or isinstance(raw, bool):
        return None
    text = " ".join(str(raw).split())
    if not text:
        return None
    by_upper = {str(letter).upper(): letter for letter in options}
    bare = text.strip(_DECORATION)
    if bare.upper() in by_upper:
        return by_upper[bare.upper()]
    wanted = _norm(bare)
    exact = [letter for letter, option in options.items() if _norm(option).strip(_DECORATION) == wanted]
    if exact:  # two options with the same text: the reply cannot tell them apart
        return exact[0] if len(exact) == 1 else None
    named: set[str] = set()
    rest = text
    for letter, option in sorted(options.items(), key=lambda item: -len(_norm(item[1]))):
        quoted = _norm(option).strip(_DECORATION)
        if not quoted:
            continue
        pattern = re.compile(r"(?<!\w)" + r"\s+".join(map(re.escape, quoted.split())) + r"(?!\w)", re.IGNORECASE)
        rest, found = pattern.subn(" ", rest)
        if found:
            named.add(letter)
    named.update(by_upper[m.upper()] for m in _KEYWORD.findall(rest) if m.upper() in by_upper)
    named.update(by_upper[m] for m in _CAPITAL.findall(rest) if m in by_upper)
    return named.pop() if len(named) == 1 else None
