"""Is an ``--api-base`` server llama.cpp's? Then size requests in flight and the timeout to it.

llama.cpp's server answers ``GET /props`` (``total_slots``) and ``GET /slots`` beside its ``/v1`` routes. N slots
compute N requests at once; more only queue, and a request that times out keeps its slot busy, so a remote
API's 120 s timeout makes retries queue behind abandoned requests on a busy CPU. One short GET when the
backend opens; any failure means "not llama.cpp" and changes nothing.
"""

from __future__ import annotations

import json
import logging
import time

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
    deadline = time.monotonic() + 2 * timeout_s  # both GETs, whole: a server trickling its answer ends here
    try:
        with httpx.Client(timeout=timeout_s, headers=headers, follow_redirects=False) as client:
            props = _get_json(client, f"{root}/props", deadline)
            slots = props.get("total_slots") if isinstance(props, dict) else None
            if isinstance(slots, int) and slots > 0:
                return slots
            listed = _get_json(client, f"{root}/slots", deadline)
            if isinstance(listed, list) and listed:
                return len(listed)
    except (httpx.HTTPError, ValueError, AttributeError, TimeoutError) as exc:
        logger.debug("no llama.cpp server at %s (%s)", root, type(exc).__name__)
    return None


def _get_json(client: httpx.Client, url: str, deadline: float) -> object:
    """The JSON of a 200 answer to ``GET url`` read by ``deadline`` (else `TimeoutError`), at most 1 MB; None
    for another status."""
    with client.stream("GET", url) as response:
        if response.status_code != 200:
            return None
        body = bytearray()
        for chunk in response.iter_bytes():
            body += chunk
            if time.monotonic() > deadline or len(body) > 1_000_000:
                raise TimeoutError(f"{url} did not answer in time")
        return json.loads(body)
