"""`SchemaAdapter`: one LM call per predictor call, decoding constrained to the output schema.

The backend says how it takes a schema (``structured_output`` on the LM):

* ``"json_object_schema"`` – llama.cpp's server: ``{"type": "json_object", "schema": ...}``;
* ``"json_schema"`` – OpenAI, vLLM, Ollama through litellm: ``{"type": "json_schema", ...}``;
* ``"none"`` – no constraint; the prompt alone asks for JSON.

Whatever comes back is parsed by `teammed.schema.parse_outputs`, which repairs or falls
back instead of raising; repairs and fallbacks are counted in the current `Usage`.
"""

from __future__ import annotations

import contextvars
import logging
from typing import Any

import dspy

from teammed import usage
from teammed.lm_usage import call_lm
from teammed.schema import output_schema, parse_outputs

__all__ = ["SchemaAdapter", "response_format_for", "calling_signature"]

logger = logging.getLogger(__name__)

# The behaviour being called: set by `teammed.programs.Behaviour`, so names survive
# optimizers that rebuild signatures (``with_instructions`` renames them).
calling_signature: contextvars.ContextVar[str] = contextvars.ContextVar("teammed_signature", default="?")


def response_format_for(dialect: str, schema: dict[str, Any]) -> dict[str, Any] | None:
    """The ``response_format`` request field for a backend dialect."""
    if dialect == "json_object_schema":
        return {"type": "json_object", "schema": schema}
    if dialect == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": schema["title"], "schema": schema, "strict": True}}
    if dialect == "none":
        return None
    raise ValueError(f"unknown structured-output dialect {dialect!r}; use json_object_schema, json_schema or none")


class SchemaAdapter(dspy.JSONAdapter):
    """A JSON adapter that asks the backend for schema-constrained output and never raises on parsing."""

    def __call__(
        self,
        lm: dspy.BaseLM,
        lm_kwargs: dict[str, Any],
        signature: type[dspy.Signature],
        demos: list[dict[str, Any]],
        inputs: dict[str, Any],
    ) -> list[dict[str, Any]]:
        name = calling_signature.get()
        if name == "?":
            name = signature.__name__
        schema = output_schema(signature, inputs, title=name)
        request = dict(lm_kwargs)
        fmt = response_format_for(getattr(lm, "structured_output", "json_schema"), schema)
        if fmt is not None:
            request["response_format"] = fmt
        messages = self.format(signature, demos, inputs)
        token = calling_signature.set(name)
        try:
            outputs = call_lm(lm, signature=name, messages=messages, request=request)
        finally:
            calling_signature.reset(token)
        values = []
        for output in outputs:
            text = output.get("text") if isinstance(output, dict) else output
            outcome = parse_outputs(signature, text, inputs)
            usage.record_parse(repaired=outcome.repaired and not outcome.failed, failed=outcome.failed)
            if outcome.repaired:
                logger.info("%s output needed %s: %.400r", name, "a fallback" if outcome.failed else "repair", text)
            values.append(outcome.values)
        return values

    async def acall(self, lm, lm_kwargs, signature, demos, inputs):  # type: ignore[no-untyped-def]
        return self(lm, lm_kwargs, signature, demos, inputs)
