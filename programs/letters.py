"""The one reader of option letters, for every system: teamwork rankings, votes, tie-breaks, peers.

A model asked for an option letter does not always give one. A server that ignores the JSON
schema's enum (llama.cpp, Ollama and some proxies in json mode) writes ``"Answer: C"``,
``"Option C is most likely"``, ``"(c)"``, the option's text, or prose. `letter_of` reads the
letter such a reply *unambiguously* names, and None otherwise; it never guesses:

1. the letter alone, in any case and decorated: ``"C"``, ``"(c)"``, ``"C)"``, ``"C."``, ``"**C**"``;
2. the exact text of one option (case and spacing ignored), e.g. ``"Aortic dissection"``;
3. otherwise, prose, read only when nothing in it negates or hedges ("not C", "C is wrong",
   "except C", "C or D", "maybe", "but"): the letters it names must all be one. A letter names
   an option when it stands alone and is the first word, or follows *answer*, *option*,
   *choice*, *is*, *definitely* and the like, or punctuation (``"Definitely C"``, ``"C) Aortic
   dissection"``, ``"Option A is most likely"``); each option whose whole text the reply quotes
   names it too. A letter after another word is part of a name (``"Protein C"``, ``"Vitamin A"``,
   ``"Type I"``), ``"A"``/``"I"`` before a word are the article and the pronoun, ``"E. coli"`` is
   an abbreviation, and a lower-case letter in prose is a word. When options are themselves
   single letters, only rules 1 and 2 apply.

Option texts are matched as whole words and taken out of the reply before its letters are read,
so ``"Vitamin D deficiency"`` quoted as option B's text is B, never D. Whatever these rules do
not read is dropped by the caller and counted, never replaced by a guess.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ["letter_of"]

_DECORATION = "()[]{}<>.:;,!?-*_\"'`“”‘’ \t\n"
# a stand-alone letter: no letter, digit or apostrophe beside it, and not a prefix such as "C-reactive"
_TOKEN = re.compile(r"(?<![\w'’])([A-Za-z])(?![\w'’]|-\w)")
# words that may come right before a letter that names an option ("Answer: C", "Definitely C", "is C")
_LEADS = frozenset({"answer", "answers", "option", "options", "choice", "choose", "pick", "select", "is", "be",
                    "definitely", "probably", "likely", "clearly", "surely", "certainly", "final", "correct",
                    "best", "letter"})
# a reply that negates or hedges names no option it can be read as: "not C", "C is wrong", "except C"
_NEGATION = re.compile(r"\b(?:not|no|never|neither|nor|none|except|excluding|exclude[sd]?|rule[sd]?\s+out|ruled\s+out|"
                       r"wrong|incorrect|unlikely|avoid|isn['’]t|can['’]?t|cannot|won['’]t|but|or|maybe|perhaps)\b",
                       re.IGNORECASE)


def _norm(text: object) -> str:
    return " ".join(str(text).split()).casefold()


def _names_letter(text: str, match: re.Match[str]) -> bool:
    """Whether the letter at ``match`` names an option, rather than being a word or part of a name."""
    letter, before, after = match.group(1), text[:match.start()], text[match.end():]
    if re.match(r"\.\s*[a-z]", after):  # "E. coli", "C. difficile", "H. pylori": an abbreviation
        return False
    previous = re.findall(r"[\w'’]+", before)
    stripped = before.rstrip()
    led = bool(previous) and previous[-1].casefold() in _LEADS  # "Option A is ...", "answer: a"
    if letter in "aAiI" and re.match(r"\s+[a-z]", after) and (not led or letter.islower()):
        return False  # the article "A"/"a", the pronoun "I" ("the answer is a tall man")
    if letter.islower() and previous and not stripped.endswith(("(", "[", ":", "=")) \
            and previous[-1].casefold() not in _LEADS:
        return False  # a lower-case letter in prose is a word, not an option
    # a letter after another word is part of a name ("Protein C", "Vitamin D", "Type I", "Group A")
    return not previous or stripped.endswith(("(", "[", ":", "=", ",", ";", ".", "-")) \
        or previous[-1].casefold() in _LEADS


def letter_of(raw: object, options: Mapping[str, str]) -> str | None:
    """The option letter ``raw`` unambiguously names, or None (the module docstring gives the rules)."""
    text = _text(raw)
    if text is None:
        return None
    by_upper = {str(letter).upper(): letter for letter in options}
    bare = text.strip(_DECORATION)
    if bare.isascii() and bare.upper() in by_upper:
        return by_upper[bare.upper()]
    wanted = _norm(bare)
    exact = [letter for letter, option in options.items() if _norm(option).strip(_DECORATION) == wanted]
    if exact:  # two options with the same text: the reply cannot tell them apart
        return exact[0] if len(exact) == 1 else None
    if _NEGATION.search(text) or any(len(_norm(option).strip(_DECORATION)) <= 1 for option in options.values()):
        return None  # a negated or hedged reply, or options that are themselves letters: nothing is read
    named = _named_in_prose(text, options, by_upper)
    return named.pop() if len(named) == 1 else None


def _text(raw: object) -> str | None:
    """The reply with its spacing normalized, or None when it holds no ASCII letter to read."""
    if raw is None or isinstance(raw, bool):
        return None
    text = " ".join(str(raw).split())
    if not text or not text.isascii() and not any(ch.isascii() and ch.isalpha() for ch in text):
        return None
    return text


def _named_in_prose(text: str, options: Mapping[str, str], by_upper: Mapping[str, str]) -> set[str]:
    """The options prose names: each whose whole text it quotes (longest first, taken out of the
    reply), then each letter that names an option in what is left."""
    named: set[str] = set()
    rest = text
    for letter, option in sorted(options.items(), key=lambda item: -len(_norm(item[1]))):
        quoted = _norm(option).strip(_DECORATION)
        pattern = re.compile(r"(?<!\w)" + r"\s+".join(map(re.escape, quoted.split())) + r"(?!\w)", re.IGNORECASE)
        rest, found = pattern.subn(" ", rest)
        if found:
            named.add(letter)
    named.update(by_upper[m.group(1).upper()] for m in _TOKEN.finditer(rest)
                 if m.group(1).upper() in by_upper and _names_letter(rest, m))
    return named
