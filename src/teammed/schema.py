"""JSON schemas for a signature's outputs, with per-question choices, and tolerant parsing.

Pure functions: they turn a DSPy signature (plus the call's inputs) into the JSON schema a
backend can constrain decoding with, and turn whatever came back into typed field values.
"""

from __future__ import annotations

import copy
import enum
import functools
import json
import threading
from dataclasses import dataclass
from typing import Annotated, Any, Literal, get_args, get_origin

import json_repair
import pydantic
from dspy.adapters.utils import parse_value

__all__ = [
    "ChoicesFrom",
    "SameLengthAs",
    "Choice",
    "output_schema",
    "parse_outputs",
    "ParseOutcome",
    "fallback_value",
    "MAX_STRING_CHARS",
    "DIALECTS",
    "PROVIDER_PROFILES",
    "dialect_schema",
    "enforce_limits",
]

# Long enough for every free-text output the prompts ask for (the longest is a 150-word
# report or reasoning: ~1,100 characters of English). Providers that take no string-length
# keyword get none; the limit is then enforced when parsing (`enforce_limits`).
MAX_STRING_CHARS = 2000

# The ways a request can carry a schema, strongest first; a backend that rejects one is
# moved to the next for the rest of the run (see teammed.backends.dialects).
DIALECTS = ("json_schema_strict", "json_schema", "json_object_schema", "json_object", "none")

# JSON Schema keywords each provider family does NOT take (left out of the request,
# enforced when parsing). Sources (checked 2026-11): OpenAI structured outputs "supported
# schemas" (strings: pattern, format only; arrays: minItems/maxItems; numbers: minimum/maximum);
# Anthropic structured outputs limitations (no numeric, string-length or minItems>1 constraints,
# additionalProperties must be false); Gemini responseSchema (OpenAPI subset: enum, items,
# minItems/maxItems, minimum/maximum, required; no additionalProperties, no string lengths);
# vLLM guided decoding (xgrammar/outlines: full JSON Schema); Ollama and llama.cpp
# (grammar from schema; string lengths ignored or costly: left out).
PROVIDER_PROFILES: dict[str, frozenset[str]] = {
    "openai": frozenset({"maxLength", "minLength"}),
    "anthropic": frozenset({"maxLength", "minLength", "minimum", "maximum", "minItems", "maxItems"}),
    "gemini": frozenset({"maxLength", "minLength", "additionalProperties", "title"}),
    "vllm": frozenset(),
    "ollama": frozenset({"maxLength", "minLength"}),
    "llamacpp": frozenset({"maxLength", "minLength"}),
    "generic": frozenset({"maxLength", "minLength"}),
}


def dialect_schema(schema: dict[str, Any], profile: str) -> dict[str, Any]:
    """``schema`` without the keywords provider family ``profile`` does not take (a copy)."""
    if profile not in PROVIDER_PROFILES:
        raise ValueError(f"unknown provider profile {profile!r}; use one of {', '.join(PROVIDER_PROFILES)}")
    return _without(schema, PROVIDER_PROFILES[profile], top=True)


def _without(node: Any, drop: frozenset[str], *, top: bool) -> Any:
    """A copy of ``node`` without the keywords in ``drop`` (a module function: a nested recursive one
    is a reference cycle, left to the garbage collector, at every call)."""
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key in drop and not (key == "title" and top):
                continue
            if key in ("properties", "$defs"):  # names of fields, not keywords
                out[key] = {k: _without(v, drop, top=False) for k, v in value.items()}
            else:
                out[key] = _without(value, drop, top=False)
        return out
    if isinstance(node, list):
        return [_without(v, drop, top=False) for v in node]
    return node


def enforce_limits(value: Any, schema: dict[str, Any]) -> tuple[Any, bool]:
    """Apply the length limits of ``schema`` to a parsed value; returns (value, changed).

    Strings longer than ``maxLength`` are cut, lists longer than ``maxItems`` are cut: the
    constraints a provider did not enforce while decoding are enforced here.
    """
    changed = False
    if isinstance(value, str) and isinstance(schema.get("maxLength"), int) and len(value) > schema["maxLength"]:
        return value[: schema["maxLength"]], True
    if isinstance(value, list):
        limit = schema.get("maxItems")
        if isinstance(limit, int) and len(value) > limit:
            value, changed = value[:limit], True
        items = [enforce_limits(item, schema.get("items") or {}) for item in value]
        return [v for v, _ in items], changed or any(c for _, c in items)
    if isinstance(value, dict) and isinstance(schema.get("properties"), dict):
        out = {key: enforce_limits(item, schema["properties"].get(key) or {}) for key, item in value.items()}
        return {k: v for k, (v, _) in out.items()}, any(c for _, c in out.values())
    return value, changed


@dataclass(frozen=True)
class SameLengthAs:
    """Marks a list output that must have one item per item of the named input field."""

    source: str


@dataclass(frozen=True)
class ChoicesFrom:
    """Marks an output whose values must be keys (or items) of the named input field."""

    source: str


def Choice(source: str) -> Any:  # noqa: N802 - reads like a type
    """``Choice("options")`` is a string restricted, per call, to the keys of input ``options``."""
    return Annotated[str, ChoicesFrom(source)]


def _choice_marker(field: pydantic.fields.FieldInfo) -> tuple[ChoicesFrom, bool] | None:
    for meta in field.metadata:
        if isinstance(meta, ChoicesFrom):
            return meta, False
    annotation = field.annotation
    if get_origin(annotation) is list:
        (item,) = get_args(annotation) or (None,)
        if get_origin(item) is Annotated:
            for meta in get_args(item)[1:]:
                if isinstance(meta, ChoicesFrom):
                    return meta, True
    return None


def _allowed(source_value: Any) -> list[str] | None:
    if isinstance(source_value, dict | list | tuple):  # a dict's keys, a list's items
        return [str(v) for v in source_value]
    return None


def _inlined(node: Any, defs: dict[str, Any]) -> Any:
    """``node`` with each ``$ref`` replaced by a copy of its definition (a module function: a nested
    recursive one is a reference cycle at every call)."""
    if isinstance(node, dict):
        if "$ref" in node:
            return _inlined(copy.deepcopy(defs[node["$ref"].split("/")[-1]]), defs)
        return {k: _inlined(v, defs) for k, v in node.items()}
    if isinstance(node, list):
        return [_inlined(v, defs) for v in node]
    return node


def _tighten(node: Any) -> None:
    """Strict-mode shape (every property required, no extras) and bounded strings."""
    if isinstance(node, dict):
        if "properties" not in node:
            node.pop("title", None)
        if node.get("type") == "object" and "properties" in node:
            node["required"] = list(node["properties"])
            node["additionalProperties"] = False
        if node.get("type") == "string" and "enum" not in node:
            node.setdefault("maxLength", MAX_STRING_CHARS)
        for value in node.values():
            _tighten(value)
    elif isinstance(node, list):
        for value in node:
            _tighten(value)


def output_schema(signature: Any, inputs: dict[str, Any] | None = None, *, title: str | None = None) -> dict[str, Any]:
    """The JSON schema of ``signature``'s outputs; choice fields are limited to this call's inputs.

    A fresh copy each call. It depends on the inputs only through the choices (letters) and the
    lengths its fields are tied to, so it is built once per signature and such inputs (building it
    took ~0.17 ms of a call's CPU; copying it takes a fraction of that).
    """
    inputs = inputs or {}
    try:
        key = (signature, title, _input_shape(signature, inputs))
        hash(key)
    except TypeError:  # an unhashable input shape: build it afresh
        return _build_output_schema(signature, inputs, title=title)
    with _SCHEMAS_LOCK:
        cached = _SCHEMAS.get(key)
    if cached is None:
        cached = _build_output_schema(signature, inputs, title=title)
        with _SCHEMAS_LOCK:
            if len(_SCHEMAS) >= _SCHEMAS_MAX:
                _SCHEMAS.clear()
            _SCHEMAS[key] = cached
    return copy.deepcopy(cached)


_SCHEMAS: dict[Any, dict[str, Any]] = {}
_SCHEMAS_LOCK = threading.Lock()
_SCHEMAS_MAX = 4096


def _input_shape(signature: Any, inputs: dict[str, Any]) -> tuple[Any, ...]:
    """What of ``inputs`` an output schema reads: each choice field's allowed values, each
    same-length field's source length."""
    shape: list[Any] = []
    for name, kind, source in _readers(signature):
        if kind == "choice":
            allowed = _allowed(inputs.get(source))
            shape.append((name, tuple(allowed) if allowed is not None else None))
        else:
            value = inputs.get(source)
            shape.append((name, source, len(value) if isinstance(value, list | tuple | dict) else None))
    return tuple(shape)


@functools.lru_cache(maxsize=1024)
def _readers(signature: Any) -> tuple[tuple[str, str, str], ...]:
    """The inputs ``signature``'s output schema reads, as (output field, "choice" or "length", input
    field): DSPy rebuilds ``output_fields`` on every access, which was about 8% of the GIL-held samples
    in a ``py-spy --gil`` profile of 256 questions in flight. A signature class never changes its fields
    once made."""
    readers: list[tuple[str, str, str]] = []
    for name, field in signature.output_fields.items():
        marker = _choice_marker(field)
        if marker:
            readers.append((name, "choice", marker[0].source))
        readers.extend((name, "length", meta.source) for meta in field.metadata if isinstance(meta, SameLengthAs))
    return tuple(readers)


def _build_output_schema(signature: Any, inputs: dict[str, Any], *, title: str | None) -> dict[str, Any]:
    properties = {name: _field_schema(field, inputs) for name, field in signature.output_fields.items()}
    defs = {name: d for prop in properties.values() for name, d in prop.pop("$defs", {}).items()}
    schema: dict[str, Any] = _inlined({"title": signature.__name__, "type": "object", "properties": properties}, defs)
    _tighten(schema)
    schema["title"] = title or signature.__name__
    return schema


def _field_schema(field: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """One output field's schema: a choice among the allowed letters (or a ranking of them), else its
    annotation's; its length bounds and its description."""
    marker = _choice_marker(field)
    allowed = _allowed(inputs.get(marker[0].source)) if marker else None
    if marker and allowed:
        item = {"type": "string", "enum": allowed}
        prop: dict[str, Any] = {"type": "array", "items": item} if marker[1] else item
    else:
        prop = _annotation_schema(field.annotation)
    _bound_length(prop, field, inputs, ranked=len(allowed) if marker and allowed and marker[1] else None)
    desc = (field.json_schema_extra or {}).get("desc") if isinstance(field.json_schema_extra, dict) else None
    if desc and not str(desc).startswith("${"):
        prop["description"] = desc
    return prop


def _bound_length(prop: dict[str, Any], field: Any, inputs: dict[str, Any], *, ranked: int | None) -> None:
    """An array's minItems and maxItems: the field's own bounds, then every letter of a ranking once
    (``ranked``: how many), then the length of the input it must match."""
    for key in ("min_length", "max_length"):
        bound = next((getattr(m, key) for m in field.metadata if getattr(m, key, None) is not None), None)
        if bound is not None and prop.get("type") == "array":
            prop["minItems" if key == "min_length" else "maxItems"] = bound
    if ranked is not None:  # a ranking: every allowed letter, once each (uniqueness is repaired)
        prop["minItems"] = prop["maxItems"] = ranked
    for meta in field.metadata:
        if isinstance(meta, SameLengthAs) and isinstance(inputs.get(meta.source), list | tuple | dict):
            prop["minItems"] = prop["maxItems"] = len(inputs[meta.source])


def _annotation_schema(annotation: Any) -> dict[str, Any]:
    """A fresh copy of ``annotation``'s JSON schema (building a TypeAdapter per call cost ~9% of a call's CPU)."""
    try:  # keyed by repr too: Literal["B", "A"] == Literal["A", "B"], but their schemas differ in order
        return copy.deepcopy(_cached_annotation_schema(annotation, repr(annotation)))
    except TypeError:  # an unhashable annotation
        return pydantic.TypeAdapter(annotation).json_schema()


@functools.lru_cache(maxsize=512)
def _cached_annotation_schema(annotation: Any, shown: str) -> dict[str, Any]:
    return pydantic.TypeAdapter(annotation).json_schema()


def fallback_value(field: pydantic.fields.FieldInfo) -> Any:
    """What a field becomes when the LM gave nothing usable: its declared default, else empty."""
    if not field.is_required():
        return field.get_default(call_default_factory=True)
    annotation = field.annotation
    if get_origin(annotation) is list:
        return []
    if annotation is bool:
        return False
    if annotation in (int, float):
        return annotation(0)
    args = get_args(annotation)
    if args and all(isinstance(a, str | int) for a in args):  # a Literal: its first value
        return args[0]
    return ""


def read_json(text: str) -> tuple[Any, bool]:
    """``text`` as JSON, else as json_repair recovers it (None if it cannot), and whether it needed repair."""
    try:
        # strict=False: raw newlines inside strings are valid output of a constrained decoder
        return json.loads(text, strict=False), False
    except (json.JSONDecodeError, TypeError):
        try:
            return json_repair.loads(text), True
        except Exception:  # json_repair is best-effort on arbitrary text
            return None, True


@dataclass
class ParseOutcome:
    values: dict[str, Any]
    repaired: bool = False
    failed: bool = False


def _parse_value(value: Any, annotation: Any) -> Any:
    """DSPy's ``parse_value``, with the validator of a non-text value built once per annotation (DSPy
    builds a pydantic TypeAdapter on every call: ~0.12 ms of a call's CPU for a ranking). For text
    values, enums, literals and ``str`` fields DSPy's own rules apply unchanged."""
    if (isinstance(value, str) or annotation is str or isinstance(annotation, enum.EnumMeta)
            or get_origin(annotation) is Literal):
        return parse_value(value, annotation)
    try:
        adapter = _validator(annotation, repr(annotation))
    except TypeError:  # an unhashable annotation
        return parse_value(value, annotation)
    return adapter.validate_python(value)


@functools.lru_cache(maxsize=512)
def _validator(annotation: Any, shown: str) -> pydantic.TypeAdapter[Any]:
    return pydantic.TypeAdapter(annotation)


def parse_outputs(signature: Any, text: str | None, inputs: dict[str, Any] | None = None, *,
                  schema: dict[str, Any] | None = None) -> ParseOutcome:
    """Typed output values from an LM completion; never raises.

    Clean JSON with every field valid is the normal case. Otherwise the JSON is repaired
    and invalid or missing fields take `fallback_value` (``repaired``); when no JSON object
    can be recovered at all, every field falls back (``failed``).
    """
    raw, repaired = read_json(text) if text else (None, False)
    if isinstance(raw, dict) and schema is not None:
        raw, cut = enforce_limits(raw, schema)
        repaired = repaired or cut
    if not isinstance(raw, dict):
        return ParseOutcome({n: fallback_value(f) for n, f in signature.output_fields.items()}, True, True)
    values: dict[str, Any] = {}
    for name, field in signature.output_fields.items():
        try:
            values[name] = _parse_value(raw[name], field.annotation)
        except Exception:  # missing, or not a value of its type
            values[name], repaired = fallback_value(field), True
    return ParseOutcome(values, repaired=repaired, failed=False)
