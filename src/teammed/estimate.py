"""What a program costs on given questions, estimated without sending a request.

`estimate_program` runs the real program (any teamwork configuration or peer system) on each
question against a stand-in LM that sends nothing, under teammed's real adapter and in the
structured-output dialect the real backend would be sent: the prompts counted are the rendered
messages the backend would get. Each call's prompt is tokenized with the model's own tokenizer: the
GGUF's for the embedded model when llama-cpp-python (the ``local-source`` extra) is installed, else
litellm's, as for every other model (tiktoken's encodings for OpenAI models, cl100k for an unknown one).
Each answer is a schema-valid JSON whose text fields are filled to the answer length of that behaviour
(a pilot's measurement, else the model family's, `verbosity_for`: the embedded model's measured means,
`ANSWER_TOKENS`, or a hosted family's published figure), so later prompts that quote earlier answers
grow as they would; completion tokens are those lengths, capped at
``max_tokens``. Dollars come from litellm's price list; teammed's own backends and a self-hosted
server (``api_base``) have none.
"""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from teammed.errors import ConfigError

if TYPE_CHECKING:
    import dspy

    from teammed.types import Question

__all__ = ["CostEstimate", "estimate_program", "prices_for", "ANSWER_TOKENS", "tokenizer_for", "BranchRange",
           "branch_range", "BRANCH_POLICIES", "make_choices", "Verbosity", "verbosity_for", "PUBLISHED_VERBOSITY",
           "billing_stand_in"]

# Mean completion tokens of one answer, per behaviour (signature): the embedded SmolLM2 model on
# MedQA-length vignettes (benchmarks/estimate_accuracy.py; docs/figures.md, "Estimating a run's
# cost"). The mean, not the median: a total is a sum of answers, and the lengths are skewed (many
# short answers, some that run to max_tokens). A behaviour not listed gets DEFAULT_ANSWER_TOKENS.
ANSWER_TOKENS: dict[str, int] = {
    "Acknowledge": 290,
    "AgentCount": 32,
    "AssessmentQuality": 13,
    "ConsensusFacts": 67,
    "CorrectionAuthority": 296,
    "DiscussionTurn": 291,
    "EvaluateResponse": 42,
    "FinalRanking": 183,
    "FormalReport": 59,
    "InitialAssessment": 90,
    "Mediation": 286,
    "QuestionTricks": 35,
    "RaiseConcern": 292,
    "RespondToConcern": 101,
    "SpecialtyRecruitment": 280,
    "VerifyUnderstanding": 274,
    "WeakestReasoning": 46,
}
DEFAULT_ANSWER_TOKENS = 60


@dataclass(frozen=True)
class Verbosity:
    """How long a model family's answers are assumed to be when no pilot measured them, and on what basis."""

    family: str
    lengths: Mapping[str, int] | int  # per behaviour, or one length for every answer
    source: str

    def text(self) -> str:
        return f"answer lengths: {self.family}'s, {self.source}; --pilot K measures the model's own"


EMBEDDED = "the embedded SmolLM2-135M"
EMBEDDED_SOURCE = "its measured mean per behaviour (teammed.estimate.ANSWER_TOKENS, benchmarks/estimate_accuracy.py)"
# The mean completion tokens billed for one chain-of-thought answer (one call a question) on MedQA's hard set
# (100 questions), from MedAgentsBench's published outputs (<model>-medqa-test_hard-cot.json; computed by
# `teammed.data.published.cot_answer_tokens`, checked against the files by tests/test_verbosity.py). A hosted
# model's JSON answer that reasons is taken at that length, whatever the behaviour: the files measure no other.
PUBLISHED_VERBOSITY: dict[str, Verbosity] = {
    model: Verbosity(model, tokens, f"every answer at {tokens} tokens, the mean billed for one chain-of-thought "
                                    f"answer on MedQA hard (MedAgentsBench's published {model}-medqa-test_hard-cot)")
    for model, tokens in (("gpt-4o-mini", 451), ("gpt-4o", 478))
}


def verbosity_for(model: str) -> Verbosity:
    """The answer lengths a dry run assumes for ``model`` without a pilot: the embedded model's measured table
    for teammed's own backends, a published family's figure (`PUBLISHED_VERBOSITY`, the longest name that
    begins the model's), else the embedded model's table as a stated default."""
    kind = model.split(":")[0]
    name = model.rsplit("/", 1)[-1].lower()
    if kind in _OWN or "smollm" in name:
        return Verbosity(EMBEDDED, ANSWER_TOKENS, EMBEDDED_SOURCE)
    for family in sorted(PUBLISHED_VERBOSITY, key=len, reverse=True):
        if name.startswith(family):
            return PUBLISHED_VERBOSITY[family]
    return Verbosity(EMBEDDED, ANSWER_TOKENS, f"{EMBEDDED_SOURCE}, a stated default: no published lengths for {model}")


_OWN = ("local", "scripted", "simulated")


class CostEstimate(BaseModel):
    """Calls, billable tokens and dollars (None: no price, ``price_note`` says why) of some questions."""

    model_config = ConfigDict(frozen=True)

    calls: int
    prompt_tokens: int
    completion_tokens: int
    usd: float | None
    price_note: str | None
    questions: int
    tokenizer: str
    lengths: str = ""  # where the answer lengths came from (`Verbosity.text`; "" when a caller gave them)


def prices_for(model: str, api_base: str | None) -> tuple[tuple[float, float] | None, str | None]:
    """USD per prompt token and per completion token of ``model`` (litellm's price list), or None and why."""
    if model.split(":")[0] in _OWN:
        return None, f"{model} is teammed's own backend, which has no price"
    if api_base:
        return None, f"{model} at --api-base is a self-hosted server, which has no price"
    from teammed._litellm import litellm as _litellm

    litellm: Any = _litellm()

    try:
        info: dict[str, Any] = dict(litellm.get_model_info(model=model))
    except Exception:  # unknown to litellm's price list
        info = {}
    given = (float(info.get("input_cost_per_token") or 0.0), float(info.get("output_cost_per_token") or 0.0))
    if not any(given):
        return None, f"litellm's price list has no price for {model}"
    return given, None


# ---------------------------------------------------------------- tokenizers
@functools.lru_cache(maxsize=4)
def _gguf_vocab(path: str) -> Any:
    import llama_cpp

    return llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)


def tokenizer_for(model: str) -> tuple[str, Callable[[list[dict[str, Any]]], int]]:
    """(name, count) where ``count(messages)`` is the prompt tokens of a chat request to ``model``."""
    kind, _, rest = model.partition(":")
    if kind == "local":
        try:
            from teammed.backends.local import default_gguf

            vocab = _gguf_vocab(str(rest or default_gguf()))
        except Exception:  # llama-cpp-python not installed (the [local] extra), or an unreadable file
            vocab = None
        if vocab is not None:
            def count_gguf(messages: list[dict[str, Any]]) -> int:
                # ChatML, as SmolLM2's template: <|im_start|>role\n ... <|im_end|>\n per message, then the
                # assistant's opening
                text = "".join(f"<|im_start|>{m['role']}\n{_text(m)}<|im_end|>\n" for m in messages)
                return len(vocab.tokenize((text + "<|im_start|>assistant\n").encode(), add_bos=False, special=True))

            return "the model's GGUF tokenizer", count_gguf
    from teammed._litellm import litellm as _litellm

    litellm: Any = _litellm()

    name = model if kind not in _OWN else "gpt-4o"

    def count_litellm(messages: list[dict[str, Any]]) -> int:
        return int(litellm.token_counter(model=name, messages=[{"role": m["role"], "content": _text(m)}
                                                               for m in messages]))

    return f"litellm's token counter for {name}", count_litellm


def _text(message: dict[str, Any]) -> str:
    content = message.get("content", "")
    if isinstance(content, list):  # multimodal parts: the text parts (an image's tokens are not counted)
        return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content)


# ---------------------------------------------------------------- the stand-in
_FILLER = ("the findings favour this option over the others given the history examination and laboratory results "
           "which together make the alternatives less likely ").split()


# How the stand-in makes the choices a model makes (a route, a confidence, a yes/no), so every path a system
# can take is priced: "first" takes each enum's first value and says yes (the figure a dry run has always
# printed), "last" the last value and no, "last-yes" and "first-no" the two mixtures, "uniform" a seeded
# draw per call (the expected figure when each option is equally likely: no measured shares).
BRANCH_POLICIES = ("first", "last", "last-yes", "first-no")
GREEDY_QUESTIONS = 2  # the questions the per-behaviour greedy pass of `branch_range` searches on
UNIFORM_DRAWS = 3  # seeded draws of the uniform policy: the expectation is their mean, the range includes them
# A list the schema does not bound (a recruiter's experts) holds its minimum under "first" and "first-no", this
# many (or its maxItems) under "last" and "last-yes", and a seeded number between under "uniform": a model asked
# for n specialists gives n, and the systems cap what they use.
LIST_ITEMS_AT_MOST = 5


def make_choices(schema: dict[str, Any], value: Any, policy: str, rng: Any) -> Any:
    """``value`` (a `schema_example`) with its enum and yes/no choices made by ``policy``."""
    if "enum" in schema:
        options = schema["enum"]
        if policy == "uniform":
            return options[rng.randrange(len(options))]
        # a count (a team's size) under a single policy: the middle (a team of 3 of 2-4)
        if schema.get("type") == "integer" or all(isinstance(c, int) for c in options):
            return sorted(options)[len(options) // 2]
        return options[-1] if policy in ("last", "last-yes") else options[0]
    if schema.get("type") == "boolean":
        return bool(rng.randrange(2)) if policy == "uniform" else policy not in ("last", "first-no")
    if schema.get("type") == "object" and isinstance(value, dict):
        return {k: make_choices(schema.get("properties", {}).get(k, {}), v, policy, rng) for k, v in value.items()}
    if schema.get("type") == "array" and isinstance(value, list) and "enum" in schema.get("items", {}):
        return rng.sample(value, len(value)) if policy == "uniform" else value  # a ranking: a permutation
    if schema.get("type") == "array" and isinstance(value, list) and value:
        least = len(value)
        most = max(least, int(schema.get("maxItems", LIST_ITEMS_AT_MOST)))
        count = {"last": most, "last-yes": most, "uniform": rng.randint(least, most) if policy == "uniform" else 0}
        items = [make_choices(schema.get("items", {}), json.loads(json.dumps(value[0])), policy, rng)
                 for _ in range(count.get(policy, least))]
        return items or value
    return value


def _filled(schema: dict[str, Any], words: int, policy: str = "first", rng: Any = None) -> Any:
    """A schema-valid value whose text fields hold about ``words`` words in all, its choices by ``policy``."""
    from teammed.backends.scripted import schema_example

    value = make_choices(schema, schema_example(schema), policy, rng)
    texts = _text_paths(schema, value)
    if not texts:
        return value
    share = max(1, words // len(texts))
    sentence = " ".join(_FILLER[i % len(_FILLER)] for i in range(share))
    for path, most in texts:  # each field within its maxLength, as a model held to the schema writes it
        _set(value, path, sentence if len(sentence) <= most else sentence[:most].rsplit(" ", 1)[0])
    return value


def _text_paths(schema: dict[str, Any], value: Any, path: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], int]]:
    """The paths of ``value``'s free-text fields (every item of a list), each with the characters it may hold."""
    from teammed.schema import MAX_STRING_CHARS

    kind = schema.get("type")
    if kind == "string" and "enum" not in schema:
        return [(path, min(MAX_STRING_CHARS, int(schema.get("maxLength", MAX_STRING_CHARS))))]
    if kind == "object" and isinstance(value, dict):
        return [p for k, v in schema.get("properties", {}).items() if k in value
                for p in _text_paths(v, value[k], (*path, k))]
    if kind == "array" and "enum" not in schema.get("items", {}) and isinstance(value, list):
        return [p for i, item in enumerate(value) for p in _text_paths(schema.get("items", {}), item, (*path, i))]
    return []


def _set(value: Any, path: tuple[Any, ...], text: str) -> None:
    for key in path[:-1]:
        value = value[key]
    if path:
        value[path[-1]] = text


class _Recorder:
    """Collects each call's messages and signature (from any thread of a deliberation)."""

    def __init__(self, policy: Policy = "first", seed: int = 0, lengths: Lengths = None, per_word: float = 1.0) -> None:
        import random

        self.calls: list[tuple[str, list[dict[str, Any]]]] = []
        self.choosing: set[str] = set()  # the behaviours whose answers hold a choice (an enum, a yes/no, a list)
        self.lock = threading.Lock()
        self.policy, self.rng, self.lengths, self.per_word = policy, random.Random(seed), lengths, per_word

    def __call__(self, call: Any) -> Any:
        with self.lock:
            self.calls.append((call.signature, call.messages))
            if _has_choice(call.schema):
                self.choosing.add(call.signature)
            words = _text_words(call.schema, _answer_tokens(call.signature, self.lengths), self.per_word)
            policy = self.policy if isinstance(self.policy, str) else self.policy.get(call.signature, "first")
            return _filled(call.schema, words, policy, self.rng)


Policy = str | Mapping[str, str]  # one of BRANCH_POLICIES (or "uniform") for every call, or one per behaviour
Lengths = Mapping[str, float] | float | None  # per behaviour (a pilot's means), one length for all, or the table


@functools.lru_cache(maxsize=1024)
def _skeleton_tokens(schema_json: str) -> int:
    """About how many tokens an answer of this schema takes besides its text: its keys, punctuation and choices
    (the answer filled with one word a text field; about 4 characters a token)."""
    return len(json.dumps(_filled(json.loads(schema_json), 1))) // 4


@functools.lru_cache(maxsize=16)
def filler_tokens_a_word(model: str) -> float:
    """How many of ``model``'s tokens one word of the stand-in's filler text takes, counted with its tokenizer
    (`tokenizer_for`): 1.0 for the filler in cl100k and o200k, more in a smaller vocabulary."""
    _, count = tokenizer_for(model)
    words = 200
    text = " ".join(_FILLER[i % len(_FILLER)] for i in range(words))
    return max(0.1, (count([{"role": "user", "content": text}]) - count([{"role": "user", "content": ""}])) / words)


def _text_words(schema: dict[str, Any], tokens: int, per_word: float) -> int:
    """The words of filler text an answer of ``tokens`` completion tokens holds: what its structure leaves, at
    ``per_word`` tokens a word (`filler_tokens_a_word`), so the text quoted in later prompts is as long as billed."""
    return max(1, int((tokens - _skeleton_tokens(json.dumps(schema, sort_keys=True))) / per_word))


def _answer_tokens(signature: str, lengths: Lengths = None) -> int:
    """A behaviour's answer length: ``lengths``'s (one number for every behaviour, or a pilot's measured mean
    when it has one for this behaviour), else the table's."""
    if isinstance(lengths, int | float):
        return max(1, round(lengths))
    if lengths and signature in lengths:
        return round(lengths[signature])
    return ANSWER_TOKENS.get(signature, DEFAULT_ANSWER_TOKENS)


def _resolved(lengths: Lengths, model: str) -> Lengths:
    """``lengths`` where they name a behaviour (a pilot's), else the model family's (`verbosity_for`)."""
    table = verbosity_for(model).lengths
    if lengths is None:
        return table
    if isinstance(lengths, Mapping):
        return {**(table if isinstance(table, Mapping) else dict.fromkeys(ANSWER_TOKENS, table)), **lengths}
    return lengths


def _dialect(model: str, api_base: str | None) -> str:
    from teammed.backends.dialects import default_dialect

    return "json_object_schema" if model.split(":")[0] == "local" else default_dialect(model, api_base=api_base)


def estimate_program(program_factory: Callable[[], dspy.Module], questions: Sequence[Question], *, model: str,
                     api_base: str | None = None, max_tokens: int = 512, policy: Policy = "first",
                     seed: int = 0, lengths: Lengths = None) -> CostEstimate:
    """The calls, billable tokens and dollars of ``program_factory()`` on ``questions`` for ``model``, the
    model's choices made by ``policy`` (`BRANCH_POLICIES`, or "uniform"), each answer as long as ``lengths``
    says for its behaviour (a pilot's measured means) or else the model family's (`verbosity_for`); no request
    is sent. A
    question whose deliberation fails against the stand-in is refused (a bug)."""
    if not questions:
        raise ConfigError("nothing to estimate: no questions")
    at = _resolved(lengths, model)
    found = _costed(_record(program_factory, questions, model=model, api_base=api_base, policy=policy, seed=seed,
                            lengths=at), len(questions), model=model, api_base=api_base, max_tokens=max_tokens,
                    lengths=at)
    return found.model_copy(update={"lengths": verbosity_for(model).text() if lengths is None else ""})


def _record(program_factory: Callable[[], dspy.Module], questions: Sequence[Question], *, model: str,
            api_base: str | None, policy: Policy, seed: int = 0, lengths: Lengths = None) -> _Recorder:
    """The calls ``program_factory()`` makes on ``questions`` against the stand-in, its answers by ``policy``."""
    import dspy

    from teammed.adapter import SchemaAdapter
    from teammed.backends.scripted import ScriptedLM

    recorder = _Recorder(policy, seed, lengths, filler_tokens_a_word(model))
    lm = ScriptedLM(recorder, model="estimate", keep_calls=False)
    lm.structured_output = _dialect(model, api_base)
    for question in questions:
        inputs: dict[str, Any] = {"question": question.question, "options": dict(question.options),
                                  "context": question.context}
        if question.image:
            inputs["image"] = question.image
        with dspy.context(lm=lm, adapter=SchemaAdapter(), disable_history=True, trace=[]):
            program_factory()(**inputs)
    return recorder


def _costed(recorder: _Recorder, questions: int, *, model: str, api_base: str | None, max_tokens: int,
            lengths: Lengths, counted: dict[str, int] | None = None) -> CostEstimate:
    """What ``recorder``'s calls on ``questions`` questions bill: prompts by the model's tokenizer, answers by
    ``lengths`` (capped at ``max_tokens``), dollars by litellm's price list."""
    name, count = tokenizer_for(model)
    seen: dict[str, int] = {} if counted is None else counted  # a prompt is counted once
    prompt = completion = 0
    for signature, messages in recorder.calls:
        key = json.dumps(messages, sort_keys=True, default=str)
        if key not in seen:
            seen[key] = count(messages)
        prompt += seen[key]
        completion += min(max_tokens, _answer_tokens(signature, lengths))
    price, why = prices_for(model, api_base)
    usd = None if price is None else prompt * price[0] + completion * price[1]
    return CostEstimate(calls=len(recorder.calls), prompt_tokens=prompt, completion_tokens=completion, usd=usd,
                        price_note=why, questions=questions, tokenizer=name)


def billing_stand_in(*, model: str, api_base: str | None, max_tokens: int, lengths: Lengths = None,
                     seed: int = 0) -> Any:
    """The stand-in as a backend that bills, for running a whole command offline (``tune --dry-run``): each
    answer's choices drawn uniformly at random (seeded by the prompt, so a figure never depends on thread
    order), its text as long as ``lengths`` (or the model family's) says; each call's usage is the prompt
    counted with the model's tokenizer and the answer's length (at most ``max_tokens``)."""
    import hashlib
    import random

    from teammed.backends.scripted import ScriptedLM

    at = _resolved(lengths, model)
    _, count = tokenizer_for(model)
    per_word = filler_tokens_a_word(model)

    def respond(call: Any) -> Any:
        # seeded by the whole request, as a server samples anew when only the temperature or rollout differs
        # (a bootstrap's retries): a figure never depends on thread order
        request = {"messages": call.messages, **call.sampling}
        digest = hashlib.sha256(json.dumps(request, sort_keys=True, default=str).encode()).digest()
        rng = random.Random(int.from_bytes(digest[:8], "big") ^ seed)
        return _filled(call.schema, _text_words(call.schema, _answer_tokens(call.signature, at), per_word), "uniform",
                       rng)

    class StandIn(ScriptedLM):
        def __init__(self) -> None:
            super().__init__(respond, model="estimate", keep_calls=False)
            self.structured_output = _dialect(model, api_base)
            self.prompts: dict[str, tuple[int, int]] = {}  # each distinct prompt's (prompt, answer) tokens
            self.lock = threading.Lock()

        @property
        def prompt_share(self) -> float:
            """The prompt's share of the tokens over the distinct prompts (not over the calls, which two
            threads asking the same prompt at once can make one more: a figure never depends on timing)."""
            prompt = sum(p for p, _ in self.prompts.values())
            return prompt / max(1, prompt + sum(a for _, a in self.prompts.values()))

        def complete(self, messages, **kwargs):  # type: ignore[no-untyped-def]
            response, info = super().complete(messages, **kwargs)
            fmt = kwargs.get("response_format") or {}
            schema = fmt.get("schema") or fmt.get("json_schema", {}).get("schema") or {}
            prompt, answer = count(messages), min(max_tokens, _answer_tokens(schema.get("title", "?"), at))
            response.usage.prompt_tokens, response.usage.completion_tokens = prompt, answer
            response.usage.total_tokens = prompt + answer
            key = hashlib.sha256(json.dumps(messages, sort_keys=True, default=str).encode()).hexdigest()
            with self.lock:
                self.prompts[key] = (prompt, answer)
            return response, info

    return StandIn()


class BranchRange(BaseModel):
    """Per question, (calls, billable tokens): the cheapest and the dearest the program can cost, and the
    expectation when each option of each choice is equally likely (``uniform``), on ``sample`` questions.

    ``paths``: whether the model's answers change what is called (`BRANCH_POLICIES` differ). With measured
    answer lengths (a pilot's), ``low`` and ``high`` are the cheapest and the dearest policy at those
    lengths. Without, nothing is assumed of the model's verbosity: ``low`` is the cheapest policy with
    one-word answers, ``high`` the dearest with every answer at ``max_tokens``."""

    model_config = ConfigDict(frozen=True)

    low: tuple[float, float]
    high: tuple[float, float]
    expected: tuple[float, float]
    sample: int
    paths: bool
    measured: bool  # the lengths were measured (a pilot); False: the range assumes nothing of them


def branch_range(program_factory: Callable[[], dspy.Module], questions: Sequence[Question], *, model: str,
                 api_base: str | None = None, max_tokens: int = 512, sample: int = 5,
                 lengths: Mapping[str, float] | None = None) -> BranchRange:
    """`BranchRange` of ``program_factory()`` on the first ``sample`` of ``questions`` (each policy runs the
    program on them once more against the stand-in; without ``lengths``, two runs more at the extremes)."""
    chosen = list(questions)[:sample]
    assumed = _resolved(lengths, model)
    choosing: dict[str, None] = {}  # the behaviours whose answers hold a choice, in the order first called
    counted: dict[str, int] = {}  # prompt tokens of each distinct prompt, shared by every run below

    def per_question(policy: Policy, seed: int = 0, at: Lengths = assumed,
                     on: Sequence[Question] = chosen) -> tuple[float, float]:
        recorder = _record(program_factory, on, model=model, api_base=api_base, policy=policy, seed=seed,
                           lengths=at)
        choosing.update(dict.fromkeys(s for s, _ in recorder.calls if s in recorder.choosing))
        found = _costed(recorder, len(on), model=model, api_base=api_base, max_tokens=max_tokens, lengths=at,
                        counted=counted)
        return found.calls / len(on), (found.prompt_tokens + found.completion_tokens) / len(on)

    draws = [per_question("uniform", seed) for seed in range(UNIFORM_DRAWS)]
    choosing.clear()  # the single policies' behaviours, as the greedy pass below walks them
    by_policy = {policy: per_question(policy) for policy in BRANCH_POLICIES}
    names = list(choosing)
    # the greedy pass searches on the first GREEDY_QUESTIONS questions; what it finds is priced on them all
    few = chosen[:GREEDY_QUESTIONS]
    on_few = {policy: per_question(policy, on=few) for policy in BRANCH_POLICIES} if few != chosen else by_policy
    cheap = _mixed(functools.partial(per_question, on=few), on_few, names, dearer=False)
    dear = _mixed(functools.partial(per_question, on=few), on_few, names, dearer=True)
    by_policy.update({"mixed-cheapest": per_question(cheap), "mixed-dearest": per_question(dear)})
    seen = [*by_policy.values(), *draws]
    expected = (sum(d[0] for d in draws) / len(draws), sum(d[1] for d in draws) / len(draws))
    low, high = min(seen, key=lambda c: (c[1], c[0])), max(seen, key=lambda c: (c[1], c[0]))
    paths = low[0] != high[0] or high[1] > 1.02 * low[1]
    if lengths is None:  # the model's verbosity unknown: the cheapest path in one word, the dearest at the cap
        low = min(low, per_question(cheap, at=1.0), key=lambda c: c[1])
        high = max(high, per_question(dear, at=float(max_tokens)), key=lambda c: c[1])
    return BranchRange(low=low, high=high, expected=expected, sample=len(chosen), paths=paths,
                       measured=lengths is not None)


def _has_choice(schema: dict[str, Any]) -> bool:
    """Whether a policy can change an answer of ``schema``: a text enum, a yes/no or a list of free items."""
    kind = schema.get("type")
    if "enum" in schema:
        return len(schema["enum"]) > 1
    if kind == "boolean":
        return True
    if kind == "object":
        return any(_has_choice(v) for v in schema.get("properties", {}).values())
    return kind == "array" and len(schema.get("items", {}).get("enum", [0, 1])) > 1


def _mixed(cost: Callable[..., tuple[float, float]], by_policy: Mapping[str, tuple[float, float]],
           names: Sequence[str], *, dearer: bool) -> Policy:
    """The cheapest (or the dearest) assignment of a policy to each behaviour, by one greedy pass from the best
    single policy: paths that need one behaviour to say yes and another no (a gap found, no consensus yet)."""
    sign = 1 if dearer else -1

    def key(c: tuple[float, float]) -> tuple[float, float]:
        return sign * c[1], sign * c[0]

    start = max(by_policy, key=lambda p: key(by_policy[p]))
    best: dict[str, str] = dict.fromkeys(names, start)
    best_cost = by_policy[start]
    for name in names:
        for policy in BRANCH_POLICIES:
            if policy == best[name]:
                continue
            trial = {**best, name: policy}
            found = cost(trial)
            if key(found) > key(best_cost):
                best, best_cost = trial, found
    return best
