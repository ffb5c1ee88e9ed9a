"""The one seam to the Hugging Face hub: the local HF cache when offline, fast to fail when unreachable.

``HF_HUB_OFFLINE=1`` or ``HF_DATASETS_OFFLINE=1`` ("download on the login node, run offline"):
the hub is not contacted and ``datasets`` reads its local cache (``HF_HOME`` /
``HF_DATASETS_CACHE``); a data set that is not cached fails with the command that caches it.
``TEAMMED_OFFLINE=1`` skips the hub and its cache entirely. Otherwise a metadata request with a
short timeout runs first, so an unreachable hub fails in seconds instead of after ``datasets``'
own retries. ``revision`` pins a tag, branch or commit of the hub repository.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from teammed.data._rows import Row

__all__ = ["HubRef", "HubUnavailable", "fetch_hub_rows", "HUB_TIMEOUT_S"]

logger = logging.getLogger(__name__)

HUB_TIMEOUT_S = 10.0
OFFLINE_VARIABLES = ("TEAMMED_OFFLINE", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
CACHE_ONLY_VARIABLES = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")


def _first_set(*variables: str) -> str | None:
    """``NAME=value`` of the first of ``variables`` set to 1, true, yes or on, or None."""
    return next((f"{v}={os.environ[v]}" for v in variables
                 if os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on")), None)


@dataclass(frozen=True)
class HubRef:
    """A data set on the hub: repository, optional config, and split names where they differ."""

    repo: str
    config: str | None = None
    splits: Mapping[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.repo if self.config is None else f"{self.repo} ({self.config})"


class HubUnavailable(Exception):
    """The hub was skipped or failed; the message says why (it ends up in a DataError)."""


def _cache_command(ref: HubRef, split: str, revision: str | None) -> str:
    args = [repr(ref.repo)] + ([repr(ref.config)] if ref.config else []) + [f"split={split!r}"]
    if revision:
        args.append(f"revision={revision!r}")
    return f'python -c "import datasets; datasets.load_dataset({", ".join(args)})"'


def fetch_hub_rows(ref: HubRef, split: str, *, revision: str | None = None,
                   timeout: float = HUB_TIMEOUT_S) -> list[Row]:
    """All rows of one split of ``ref`` (from the local HF cache when offline); HubUnavailable otherwise."""
    reason = _first_set("TEAMMED_OFFLINE")  # neither the hub nor its cache may be read
    if reason is not None:
        raise HubUnavailable(f"the Hugging Face hub and its cache were skipped because {reason} (unset it to "
                             f"fetch {ref})")
    hub_split = ref.splits.get(split, split)
    cache_only = _first_set(*CACHE_ONLY_VARIABLES)  # loads restricted to the local HF cache
    if cache_only is None:
        _probe(ref, timeout, **({"revision": revision} if revision else {}))
    elif revision is not None:
        logger.warning("%s: offline, datasets reads the cached copy of %s; it cannot check that the cache holds "
                       "revision %s", cache_only, ref, revision)
    try:
        import datasets

        with _offline_mode(cache_only is not None):
            pinned = {"revision": revision} if revision else {}
            table = datasets.load_dataset(ref.repo, ref.config, split=hub_split, **pinned)
    except Exception as exc:  # datasets raises many unrelated types (network, schema, scripts)
        if cache_only is not None:
            raise HubUnavailable(
                f"{ref} split {hub_split!r} is not in the local Hugging Face cache and {cache_only} forbids "
                f"downloading it ({_short(exc)}); on a machine with network, with the same HF_HOME, run: "
                f"{_cache_command(ref, hub_split, revision)}") from exc
        raise HubUnavailable(f"loading {ref} split {hub_split!r} from the hub failed: {_short(exc)}") from exc
    source = "the local Hugging Face cache" if cache_only else "the Hugging Face hub"
    logger.info("Loaded %d rows of %s [%s] from %s", len(table), ref, hub_split, source)
    at = f"@{revision}" if revision else ""
    return [Row(f"{ref}{at} [{hub_split}], row {i + 1}", item) for i, item in enumerate(table)]


@contextlib.contextmanager
def _offline_mode(on: bool) -> Iterator[None]:
    """Make ``datasets`` and ``huggingface_hub`` cache-only even if the variable was set after they were imported."""
    if not on:
        yield
        return
    import datasets
    import huggingface_hub.constants as hub_constants

    saved = datasets.config.HF_HUB_OFFLINE, hub_constants.HF_HUB_OFFLINE
    datasets.config.HF_HUB_OFFLINE = hub_constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        datasets.config.HF_HUB_OFFLINE, hub_constants.HF_HUB_OFFLINE = saved


def _probe(ref: HubRef, timeout: float, revision: str | None = None) -> None:
    try:
        from huggingface_hub import HfApi

        HfApi().dataset_info(ref.repo, revision=revision, timeout=timeout)
    except Exception as exc:  # connection, timeout, 404 and auth errors all mean "not from the hub"
        raise HubUnavailable(f"the Hugging Face hub did not answer for {ref.repo}: {_short(exc)}") from exc


def _short(exc: BaseException) -> str:
    first_line = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {first_line[:200]}"
