"""A memo of LM responses keyed by the exact request, scoped to one tune run.

Configurations share calls (the same recruitment and assessment prompts in early phases), so `MemoLM`
computes each distinct request once per process. No figure depends on it: every call is billed with its
original tokens and cost, the hits are reported apart as the reuse rate, and only an identical request
(messages and every request field) is reused, so a deterministic backend answers the same without it.
"""

from __future__ import annotations

import copy
import hashlib
import json
import threading
from typing import Any

from teammed.backends.base import MeteredLM

__all__ = ["MemoLM"]


class MemoLM(MeteredLM):
    """Wraps a `MeteredLM`; ``hits`` and ``requests`` count reuse. A backend cache hit is billed as a call too."""

    def __init__(self, inner: MeteredLM):
        super().__init__(model=getattr(inner, "model", "memo"), cache=False)
        self.inner = inner
        self.kwargs = dict(getattr(inner, "kwargs", {}) or {})
        self._memo: dict[str, tuple[Any, dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self.hits = 0
        self.requests = 0

    # The adapter asks the LM it is given whether it takes the schema itself (and which dialect it
    # speaks now): the answer is the wrapped backend's, or a provider would get constraints it
    # refuses (llama.cpp dies on the grammar of a long maxLength).
    @property
    def takes_schema(self) -> bool:  # type: ignore[override]
        return bool(getattr(self.inner, "takes_schema", False))

    @property
    def structured_output(self) -> str:  # type: ignore[override]
        return str(getattr(self.inner, "structured_output", "json_schema"))

    def complete(self, messages, **kwargs):  # type: ignore[no-untyped-def]
        text = json.dumps({"messages": messages, "request": kwargs}, sort_keys=True, default=str)
        key = hashlib.sha256(text.encode()).hexdigest()
        with self._lock:
            self.requests += 1
            found = self._memo.get(key)
            self.hits += found is not None
        if found is None:
            response, info = self.inner.complete(messages, **kwargs)
            info = {k: v for k, v in info.items() if k != "cache_hit"}  # billed as if uncached
            with self._lock:
                self._memo.setdefault(key, (copy.deepcopy(response), dict(info)))
            return response, info
        response, info = found
        return copy.deepcopy(response), dict(info)

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {"requests": self.requests, "hits": self.hits}

    def dump_state(self) -> dict[str, Any]:
        return {"model": self.model, "memo": True}
