"""Structured output per provider: which ``response_format`` a backend takes, and what to do when it refuses.

Each provider's first dialect and the schema keywords it is not sent: the table in
docs/backends.md ("Structured output"). A request rejected because of its ``response_format``
(any status: llama.cpp answers 500 "Input should be 'text' or 'json_object'") is not retried: the
deployment moves one step down `teammed.schema.DIALECTS` for the rest of the run, warns once
and counts it.
"""

from __future__ import annotations

import re
from typing import Any

from teammed.schema import DIALECTS, dialect_schema

__all__ = ["default_dialect", "provider_profile", "response_format_for", "next_dialect", "is_format_rejection"]


def provider_profile(model: str, *, api_base: str | None = None) -> str:
    """The provider family of a litellm model string (decides which schema keywords to send)."""
    provider = model.split("/", 1)[0] if "/" in model else "openai"
    if provider in ("anthropic", "bedrock"):
        return "anthropic"
    if provider in ("gemini", "vertex_ai", "vertex_ai_beta"):
        return "gemini"
    if provider in ("hosted_vllm", "vllm"):
        return "vllm"
    if provider in ("ollama", "ollama_chat"):
        return "ollama"
    if provider in ("openai", "azure", "text-completion-openai") and not api_base:
        return "openai"
    return "generic"


def default_dialect(model: str, *, api_base: str | None = None) -> str:
    """The strongest dialect worth trying first for ``model`` (degrades on rejection)."""
    return "json_schema_strict" if provider_profile(model, api_base=api_base) == "openai" else "json_schema"


def next_dialect(dialect: str) -> str | None:
    """The next weaker dialect, or None below ``none``."""
    index = DIALECTS.index(dialect)
    return DIALECTS[index + 1] if index + 1 < len(DIALECTS) else None


def response_format_for(dialect: str, schema: dict[str, Any], *, profile: str = "generic") -> dict[str, Any] | None:
    """The ``response_format`` request field for ``dialect``, with ``profile``'s keywords left out."""
    if dialect not in DIALECTS:
        raise ValueError(f"unknown structured-output dialect {dialect!r}; use one of {', '.join(DIALECTS)}")
    if dialect == "none":
        return None
    if dialect == "json_object":
        return {"type": "json_object"}
    sent = dialect_schema(schema, profile)
    if dialect == "json_object_schema":
        return {"type": "json_object", "schema": sent}
    name = re.sub(r"[^A-Za-z0-9_-]", "_", str(schema.get("title") or "output"))[:64]
    return {"type": "json_schema",
            "json_schema": {"name": name, "schema": sent, "strict": dialect == "json_schema_strict"}}


_FORMAT_WORDS = re.compile(
    r"response_format|response format|json_schema|json schema|json_object|structured output|"
    r"input should be 'text'|'text' or 'json_object'|guided_json|grammar|"
    r"invalid schema|schema is invalid|strict mode|additionalproperties|unsupported schema|format.*not supported",
    re.I,
)


def is_format_rejection(message: str, status: int | None) -> bool:
    """Whether an error says the request's ``response_format`` was refused (whatever the status)."""
    if status is not None and status not in (400, 415, 422, 500, 501):
        return False
    return bool(_FORMAT_WORDS.search(message or ""))
