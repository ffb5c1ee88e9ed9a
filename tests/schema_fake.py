"""A fake OpenAI-compatible model that answers any teammed behaviour from its response schema.

It reads the JSON schema teammed sends as ``response_format`` and fills it: letters prefer the
question's ``Key: X`` (so a test knows the right answer), rankings put that letter first,
strings are short sentences, numbers their minimum. Without a schema it answers ``{}``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tests.fake_openai import completion

_KEY = re.compile(r"Key: ([A-J])\b")


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content or "")


def key_of(request: dict[str, Any]) -> str | None:
    """The ``Key: X`` of the question in the last user message.

    Demos come as earlier messages (DSPy's layout) or, in teammed's compact layout, after the
    case inside that message: the case leads it, so its key is the first one found.
    """
    users = [m for m in request.get("messages", []) if m.get("role") == "user"]
    found = _KEY.findall(_text(users[-1])) if users else []
    return found[0] if found else None


def _fill(schema: dict[str, Any], defs: dict[str, Any], key: str | None) -> Any:
    if "$ref" in schema:
        return _fill(defs[schema["$ref"].rsplit("/", 1)[-1]], defs, key)
    if "anyOf" in schema:
        choices = [s for s in schema["anyOf"] if s.get("type") != "null"]
        return _fill(choices[0], defs, key)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        values = schema["enum"]
        return key if key in values else values[0]
    kind = schema.get("type")
    if kind == "object":
        return {name: _fill(sub, defs, key) for name, sub in schema.get("properties", {}).items()}
    if kind == "array":
        items = schema.get("items", {})
        letters = items.get("enum")
        if letters and all(isinstance(x, str) and len(x) == 1 for x in letters):
            return ([key] if key in letters else []) + [x for x in letters if x != key]
        n = max(int(schema.get("minItems", 1)), 1)
        return [_fill(items, defs, key) for _ in range(n)]
    if kind == "integer":
        return int(schema.get("minimum", 2))
    if kind == "number":
        return float(schema.get("minimum", 0.5))
    if kind == "boolean":
        return True
    return "A short, plausible sentence."


def schema_of(request: dict[str, Any]) -> dict[str, Any] | None:
    fmt = request.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        return fmt["json_schema"]["schema"]
    return fmt.get("schema")


def respond(request: dict[str, Any]) -> str:
    """The JSON text a cooperative model would return for ``request``."""
    schema = schema_of(request)
    if schema is None:
        return "{}"
    return json.dumps(_fill(schema, schema.get("$defs", {}), key_of(request)))


def handler(n: int, request: dict[str, Any]):  # noqa: ARG001 - FakeOpenAI's handler shape
    return 200, {}, completion(respond(request), prompt_tokens=100 + n, completion_tokens=10)
