"""Where a deliberation's shared prompt prefix ends, and the provider markers that cache it.

`teammed.adapter.SchemaAdapter` lays each compact request out as the preamble (system message),
then the case (question, options, context, image), then `TASK_MARKER` and what differs per
behaviour. Every call of a deliberation shares everything before the marker. Anthropic caches a
prompt only up to a ``cache_control`` breakpoint the request sets (and only from 1,024 tokens, 2,048
to 4,096 for some models; a shorter marked prefix is processed uncached, without error), so for
Anthropic-style providers `mark_shared_prefix` splits the user message at the marker and marks
the case's block: a case long enough (a PubMedQA abstract, a SOAP note, an image) is then read
from Anthropic's cache by every later call of the deliberation.
"""

from __future__ import annotations

from typing import Any

__all__ = ["TASK_MARKER", "mark_shared_prefix"]

TASK_MARKER = "[[ ## task ## ]]"


def mark_shared_prefix(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with an ephemeral ``cache_control`` breakpoint at the end of the case.

    Only a compact request (a user message whose text holds `TASK_MARKER` after the case) is
    marked; any other layout comes back unchanged (nothing before its marker is shared).
    The input is not modified.
    """
    out = []
    marked = False
    for message in messages:
        content = message.get("content")
        if not marked and message.get("role") == "user" and isinstance(content, str | list):
            # a text message is one text part: split and marked like a multimodal message's
            marked_blocks = _mark_blocks([{"type": "text", "text": content}] if isinstance(content, str) else content)
            if marked_blocks is not None:
                out.append({**message, "content": marked_blocks})
                marked = True
                continue
        out.append(message)
    return out


def _mark_blocks(blocks: list[Any]) -> list[Any] | None:
    """A user message's parts (text, images): the breakpoint on the last part before the task, the
    text part holding the marker split in two. None when no part holds the marker, or nothing comes
    before it."""
    for i, block in enumerate(blocks):
        if isinstance(block, dict) and block.get("type") == "text" and TASK_MARKER in str(block.get("text", "")):
            case, found, rest = str(block["text"]).partition(TASK_MARKER)
            head = list(blocks[:i])
            if case.strip():
                head.append({**block, "text": case})
            if not head or not isinstance(head[-1], dict):
                return None
            head[-1] = {**head[-1], "cache_control": {"type": "ephemeral"}}
            return [*head, {**block, "text": found + rest}, *blocks[i + 1:]]
    return None
