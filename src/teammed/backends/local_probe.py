"""Is an ``--api-base`` server llama.cpp's? Then size requests in flight and the timeout to it.

llama.cpp's server answers ``GET /props`` (``total_slots``) and ``GET /slots`` (one entry per
slot) beside its OpenAI-compatible ``/v1`` routes. A server with N slots computes N requests at
once; more only queue, and a request that times out keeps its slot busy, so a remote API's
120 s timeout makes retries queue behind abandoned requests on a busy CPU. One short GET, made
once when the backend opens; any failure means "not llama.cpp" and changes nothing.
"""

from __future__ import annotations

import logging

import httpx

__all__ = ["llamacpp_slots", "server_root"]

logger = logging.getLogger(__name__)


def server_root(api_base: str) -> str:
    """``http://host:8080/v1`` -> ``http://host:8080`` (llama.cpp's own routes live at the root)."""
    base = api_base.rstrip("/")
    return base[: -len("/v1")] if base.endswith("/v1") else base


def llamacpp_slots(api_base: str, *, timeout_s: float = 2.0, api_key: str | None = None) -> int | None:
    """The number of slots of the llama.cpp server at ``api_base``, or None when it is not one (or says nothing)."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    root = server_root(api_base)
    try:
        with httpx.Client(timeout=timeout_s, headers=headers, follow_redirects=False) as client:
            props = client.get(f"{root}/props")
            if props.status_code == 200:
                slots = props.json().get("total_slots")
                if isinstance(slots, int) and slots > 0:
                    return slots
            listed = client.get(f"{root}/slots")
            slots_list = listed.json() if listed.status_code == 200 else None
            if isinstance(slots_list, list) and slots_list:
                return len(slots_list)
    except (httpx.HTTPError, ValueError, AttributeError) as exc:
        logger.debug("no llama.cpp server at %s (%s)", root, type(exc).__name__)
    return None
