"""`ScriptedLM`: a deterministic fake LM for tests and offline demos.

It answers from a function of the call (the signature's name, the call's inputs and the
output schema), so answers do not depend on the order threads happen to call it in. It
goes through the same adapter, schema and accounting as a real backend.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from teammed.backends.base import MeteredLM
from teammed.backends.openai_http import ChatResponse

__all__ = ["ScriptedLM", "ScriptedCall", "schema_example"]

_FIELD = re.compile(r"\[\[ ## (\w+) ## \]\]\n(.*?)(?=\n\n\[\[ ## |\n\nRespond with|\Z)", re.S)


@dataclass
class ScriptedCall:
    """What the scripted responder sees of one LM call."""

    signature: str
    inputs: dict[str, Any]
    schema: dict[str, Any]
    messages: list[dict[str, Any]] = field(default_factory=list)
    sampling: dict[str, Any] = field(default_factory=dict)  # the request's other arguments (temperature, ...)

    def choices(self, name: str) -> list[str]:
        """The allowed values of output ``name`` (a choice field), from the schema."""
        prop = self.schema["properties"][name]
        return list(prop.get("enum") or prop.get("items", {}).get("enum") or [])

    def default(self) -> dict[str, Any]:
        """A schema-valid answer: first choices, short strings, minimal lists."""
        return schema_example(self.schema)


def schema_example(schema: dict[str, Any]) -> Any:
    """A small value that validates against ``schema`` (enums take their first value)."""
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object":
        return {k: schema_example(v) for k, v in schema.get("properties", {}).items()}
    if kind == "array":
        item = schema.get("items", {})
        if "enum" in item:
            return list(item["enum"])
        return [schema_example(item) for _ in range(max(1, schema.get("minItems", 1)))]
    if kind == "string":
        return "noted"
    if kind == "integer":
        return max(0, int(schema.get("minimum", 0)))
    if kind == "number":
        return float(schema.get("minimum", 0.5) if "minimum" in schema else 0.5)
    if kind == "boolean":
        return True
    return None


def _parse_inputs(messages: list[dict[str, Any]]) -> dict[str, Any]:
    text = next((m["content"] for m in reversed(messages) if m.get("role") == "user"), "")
    if isinstance(text, list):
        text = " ".join(part.get("text", "") for part in text if isinstance(part, dict))
    inputs: dict[str, Any] = {}
    for name, value in _FIELD.findall(text):
        try:
            inputs[name] = json.loads(value)
        except json.JSONDecodeError:
            inputs[name] = value.strip()
    return inputs


class ScriptedLM(MeteredLM):
    """A fake LM answering ``responder(call)``; a dict is sent as JSON, a str verbatim.

    ``responder`` may return None to use `ScriptedCall.default`. Each call is appended to
    ``calls`` (thread-safe) so tests can assert on what was asked; ``keep_calls=False`` (the CLI's
    ``--model scripted``) keeps none, so a long dry run does not hold every prompt it sent.
    """

    def __init__(self, responder: Callable[[ScriptedCall], Any] | None = None, *, model: str = "scripted",
                 delay_s: float = 0.0, keep_calls: bool = True):
        super().__init__(model=model, cache=False)
        self.delay_s = delay_s
        self.keep_calls = keep_calls
        self.responder = responder or (lambda call: None)
        self.calls: list[ScriptedCall] = []
        self._lock = threading.Lock()

    def complete(self, messages, **kwargs):  # type: ignore[no-untyped-def]
        fmt = kwargs.get("response_format") or {}
        schema = fmt.get("schema") or fmt.get("json_schema", {}).get("schema") or {"properties": {}}
        call = ScriptedCall(schema.get("title", "?"), _parse_inputs(messages), schema, messages,
                            {k: v for k, v in kwargs.items() if k != "response_format"})
        if self.keep_calls:
            with self._lock:
                self.calls.append(call)
        if self.delay_s:
            time.sleep(self.delay_s)
        answer = self.responder(call)
        if answer is None:
            answer = call.default()
        elif isinstance(answer, dict):
            answer = {**call.default(), **answer}
        text = answer if isinstance(answer, str) else json.dumps(answer)
        prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in messages)
        response = ChatResponse.model_validate(dict(
            model=self.model,
            choices=[{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            usage={"prompt_tokens": prompt_tokens, "completion_tokens": len(text.split()),
                   "total_tokens": prompt_tokens + len(text.split())},
        ))
        return response, {}

    def dump_state(self) -> dict[str, Any]:
        return {"model": self.model}
