"""`SchemaAdapter`: one LM call per predictor call, decoding constrained to the output schema.

A teammed backend (``takes_schema``) receives the schema itself and decides per provider
how to send it (`teammed.backends.dialects`: strict/non-strict ``json_schema``, llama.cpp's
``json_object`` + schema, JSON mode, prompt only), degrading when a server refuses one; it
also gets the full prompt lazily, for a dialect in which the schema is no longer enforced.
Any other DSPy LM gets ``response_format`` in the dialect its ``structured_output`` names
(default ``json_schema``).

Whatever comes back is parsed by `teammed.schema.parse_outputs`, which repairs or falls
back instead of raising; repairs and fallbacks are counted in the current `Usage`.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import dspy
from dspy.adapters.types.base_type import CUSTOM_TYPE_START_IDENTIFIER

from teammed import usage
from teammed.lm_usage import acall_lm, call_lm
from teammed.prompt_cache import TASK_MARKER
from teammed.schema import DIALECTS, output_schema, parse_outputs
from teammed.usage import calling_signature

__all__ = ["SchemaAdapter", "response_format_for", "calling_signature", "compact_system_text", "compact_task_text",
           "PREAMBLE", "CASE_FIELDS"]

logger = logging.getLogger(__name__)


# The system message of every compact request: the same bytes for every behaviour, question and
# system, so a server's prefix cache (vLLM, SGLang, llama.cpp, hosted prompt caching) reuses it.
PREAMBLE = "You are an expert clinician. The case comes first; your task for this step follows it."

# The inputs that make up the case, in the order every compact request shows them first.
CASE_FIELDS = ("question", "options", "context", "image")


def compact_system_text(signature: type[dspy.Signature] | None = None) -> str:
    """The system text under an enforced schema: `PREAMBLE`, the same for every behaviour.

    ``signature`` is accepted for older callers and ignored: the behaviour's own instruction
    comes after the case, in the user message (`compact_task_text`).
    """
    return PREAMBLE


def compact_task_text(signature: type[dspy.Signature]) -> str:
    """The behaviour's part of a compact request: its instruction (which optimizers may rewrite),
    what the less obvious inputs are, and what each output field should hold.

    No type notes or reply template: the enforced schema says how to return it. The field notes
    are there because a constrained decoder (vLLM, llama.cpp) never shows the model the schema's
    descriptions.
    """
    lines = [" ".join(signature.instructions.split())]
    for name, field in signature.input_fields.items():
        desc = _desc(field)
        if desc and name not in _SELF_EVIDENT:
            lines.append(f"{name}: {desc}")
    notes = [f"{name} ({desc.rstrip('.')})" if (desc := _desc(field)) else name
             for name, field in signature.output_fields.items()]
    lines.append("Reply with: " + "; ".join(notes) + ".")
    return "\n".join(lines)


def _desc(field: Any) -> str | None:
    desc = (field.json_schema_extra or {}).get("desc") if isinstance(field.json_schema_extra, dict) else None
    return None if not desc or str(desc).startswith("${") else " ".join(str(desc).split())


# Inputs whose name says what they are: no description in the compact task text.
_SELF_EVIDENT = frozenset({"question", "options", "tied_options", "role", "team_context", "history", "shared_context",
                           "context", "image"})


def _compact_value(value: Any) -> Any:
    """Letter-keyed text (answer options) as one ``A. text`` line each: fewer tokens than JSON."""
    if isinstance(value, dict) and value and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        return "\n".join(f"{k}. {v}" for k, v in value.items())
    return value


def _json_native(value: Any, depth: int = 0) -> bool:
    """Plain JSON data of the exact built-in types (an Enum or other subclass goes through DSPy)."""
    kind = type(value)
    if value is None or kind in (bool, int):
        return True
    if kind is str:
        return CUSTOM_TYPE_START_IDENTIFIER not in value  # DSPy splits marked strings into content parts
    if kind is float:
        return value == value and value not in (float("inf"), float("-inf"))
    if depth > 32:
        return False
    if kind in (list, tuple):
        return all(_json_native(v, depth + 1) for v in value)
    if kind is dict:
        return all(type(k) is str and _json_native(v, depth + 1) for k, v in value.items())
    return False


def _plain(field: Any, value: Any) -> bool:
    """A value whose prompt text needs no DSPy machinery (a list into a ``str`` field is DSPy's numbered list)."""
    return _json_native(value) and not (isinstance(value, list | tuple) and field.annotation is str)


def _value_text(field: Any, value: Any) -> str:
    """An input's value as DSPy writes it: the plain-value fast path, else DSPy's own formatting."""
    if _plain(field, value):  # what DSPy's format_field_value makes of it
        return json.dumps(value, ensure_ascii=False) if isinstance(value, list | tuple | dict) else str(value)
    from dspy.adapters.utils import format_field_value

    return format_field_value(field_info=field, value=value)


def _expand_custom_types(message: dict[str, Any]) -> dict[str, Any]:
    from dspy.adapters.base import _expand_legacy_custom_type_markers_in_chat_message

    return _expand_legacy_custom_type_markers_in_chat_message(message)


def response_format_for(dialect: str, schema: dict[str, Any]) -> dict[str, Any] | None:
    """The ``response_format`` request field for a backend dialect (all schema keywords kept)."""
    if dialect not in DIALECTS:
        raise ValueError(f"unknown structured-output dialect {dialect!r}; use one of {', '.join(DIALECTS)}")
    from teammed.backends.dialects import response_format_for as build

    return build(dialect, schema, profile="vllm")


# Dialects in which the backend enforces the schema (the compact prompt is enough).
_ENFORCING = frozenset({"json_schema_strict", "json_schema", "json_object_schema"})


class SchemaAdapter(dspy.JSONAdapter):
    """A JSON adapter that asks the backend for schema-constrained output and never raises on parsing."""

    def _prepare(
        self, lm: dspy.BaseLM, lm_kwargs: dict[str, Any], signature: type[dspy.Signature],
        demos: list[dict[str, Any]], inputs: dict[str, Any],
    ) -> tuple[str, dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
        """The behaviour's name, its output schema, the messages and the request of one call."""
        name = calling_signature.get()
        if name == "?":
            name = signature.__name__
        schema = output_schema(signature, inputs, title=name)
        request = dict(lm_kwargs)
        if getattr(lm, "takes_schema", False):  # a teammed backend: it picks (and degrades) the dialect
            request["teammed_schema"] = schema
            compact = getattr(lm, "structured_output", "none") in _ENFORCING
            if compact:  # the full prompt, should the backend fall back to a dialect without a schema
                request["teammed_plain_messages"] = lambda: self.format(signature, demos, inputs)
        else:
            fmt = response_format_for(getattr(lm, "structured_output", "json_schema"), schema)
            if fmt is not None:
                request["response_format"] = fmt
            compact = fmt is not None
        return name, schema, self.format(signature, demos, inputs, compact=compact), request

    @staticmethod
    def _parse(name: str, signature: type[dspy.Signature], inputs: dict[str, Any], schema: dict[str, Any],
               outputs: list[Any]) -> list[dict[str, Any]]:
        values = []
        for output in outputs:
            text = output.get("text") if isinstance(output, dict) else output
            outcome = parse_outputs(signature, text, inputs, schema=schema)
            usage.record_parse(repaired=outcome.repaired and not outcome.failed, failed=outcome.failed)
            if outcome.repaired:
                logger.info("%s output needed %s: %.400r", name, "a fallback" if outcome.failed else "repair", text)
            values.append(outcome.values)
        return values

    def __call__(
        self,
        lm: dspy.BaseLM,
        lm_kwargs: dict[str, Any],
        signature: type[dspy.Signature],
        demos: list[dict[str, Any]],
        inputs: dict[str, Any],
    ) -> list[dict[str, Any]]:
        name, schema, messages, request = self._prepare(lm, lm_kwargs, signature, demos, inputs)
        token = calling_signature.set(name)
        try:
            outputs = call_lm(lm, signature=name, messages=messages, request=request)
        finally:
            calling_signature.reset(token)
        return self._parse(name, signature, inputs, schema, outputs)

    async def acall(  # type: ignore[override]
        self,
        lm: dspy.BaseLM,
        lm_kwargs: dict[str, Any],
        signature: type[dspy.Signature],
        demos: list[dict[str, Any]],
        inputs: dict[str, Any],
    ) -> list[dict[str, Any]]:
        """`__call__` for coroutines: the request is awaited (``lm.acall``), so concurrent calls overlap."""
        name, schema, messages, request = self._prepare(lm, lm_kwargs, signature, demos, inputs)
        token = calling_signature.set(name)
        try:
            outputs = await acall_lm(lm, signature=name, messages=messages, request=request)
        finally:
            calling_signature.reset(token)
        return self._parse(name, signature, inputs, schema, outputs)

    # ------------------------------------------------------------------ prompt formatting
    def format(  # type: ignore[override]
        self,
        signature: type[dspy.Signature],
        demos: list[dict[str, Any]],
        inputs: dict[str, Any],
        *,
        compact: bool = False,
    ) -> list[dict[str, Any]]:
        """The call's messages. ``compact`` when the backend enforces the output schema.

        Compact messages are laid out for prefix caches: every request of one deliberation
        starts with the same bytes. The system message is `PREAMBLE` (the same for every
        behaviour and question); the one user message starts with the case (question,
        options one per line, context, image: `CASE_FIELDS`, always in that order), and only
        then comes what differs per behaviour: its task (`compact_task_text`, with the
        instruction an optimizer may have rewritten), its demos (other cases, as text), and its
        other inputs. DSPy's field lists, type notes and JSON template are left out: the
        enforced schema already says what to return. Without a schema the full JSON-adapter
        format stays, since the prompt alone must then ask for the JSON.
        """
        if not compact:
            return super().format(signature, demos, inputs)
        fields = signature.input_fields
        kept = {k: _compact_value(v) for k, v in inputs.items() if k in fields}
        case = [k for k in CASE_FIELDS if k in kept]
        parts = [self._field_text(signature, k, kept[k]) for k in case]
        parts.append(f"{TASK_MARKER}\n{compact_task_text(signature)}")
        examples = self._compact_demos(signature, demos)
        if examples:
            parts.append(examples)
        parts.extend(self._field_text(signature, k, kept[k]) for k in fields if k in kept and k not in case)
        text = "\n\n".join(parts) + "\n"
        if CUSTOM_TYPE_START_IDENTIFIER in text:
            text = _expand_custom_types({"role": "user", "content": text})["content"]
        return [{"role": "system", "content": PREAMBLE}, {"role": "user", "content": text}]

    def _field_text(self, signature: type[dspy.Signature], name: str, value: Any) -> str:
        """``[[ ## name ## ]]`` and the value as DSPy writes it (custom types stay marked for `format`)."""
        return f"[[ ## {name} ## ]]\n{_value_text(signature.input_fields[name], value)}"

    def _compact_demos(self, signature: type[dspy.Signature], demos: list[dict[str, Any]]) -> str:
        """Few-shot demos as text inside the behaviour's part (after the case, so the prefix stays shared).

        Each is another case: its inputs as ``name: value`` lines (no ``[[ ## ]]`` markers, which
        belong to this case's inputs) and the reply it got as JSON. A demo needs at least one
        input and one output, as in DSPy's ``format_demos``.
        """
        from dspy.adapters.utils import serialize_for_json  # pydantic models and enums included

        blocks: list[str] = []
        for demo in demos or []:
            shown_in = [k for k in signature.input_fields if demo.get(k) is not None]
            shown_out = {k: demo[k] for k in signature.output_fields if demo.get(k) is not None}
            if not shown_in or not shown_out:
                continue
            lines = [f"Example {len(blocks) + 1} (another case):"]
            for k in shown_in:
                shown = _value_text(signature.input_fields[k], _compact_value(demo[k]))
                lines.append(f"{k}:{chr(10) if chr(10) in shown else ' '}{shown}")
            reply = json.dumps({k: serialize_for_json(v) for k, v in shown_out.items()}, ensure_ascii=False)
            lines.append(f"reply: {reply}")
            blocks.append("\n".join(lines))
        return "\n\n".join(["Worked examples from other cases:", *blocks]) if blocks else ""
