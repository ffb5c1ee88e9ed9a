"""The one seam to the Hugging Face hub: skipped when offline, fast to fail when unreachable.

``TEAMMED_OFFLINE=1``, ``HF_HUB_OFFLINE=1`` or ``HF_DATASETS_OFFLINE=1`` skip the hub entirely.
Otherwise a metadata request with a short timeout runs first, so an unreachable hub fails in
seconds instead of after ``datasets``' own retries.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from teammed.data._rows import Row

__all__ = ["HubRef", "HubUnavailable", "hub_skip_reason", "fetch_hub_rows", "HUB_TIMEOUT_S"]

logger = logging.getLogger(__name__)

HUB_TIMEOUT_S = 10.0
OFFLINE_VARIABLES = ("TEAMMED_OFFLINE", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")


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


def hub_skip_reason() -> str | None:
    """Why the hub must not be contacted (an offline variable that is set), or None."""
    for variable in OFFLINE_VARIABLES:
        value = os.environ.get(variable, "")
        if value.strip().lower() in ("1", "true", "yes", "on"):
            return f"{variable}={value}"
    return None


def fetch_hub_rows(ref: HubRef, split: str, *, timeout: float = HUB_TIMEOUT_S) -> list[Row]:
    """All rows of one split of ``ref``; raises HubUnavailable with the reason otherwise."""
    reason = hub_skip_reason()
    if reason is not None:
        raise HubUnavailable(f"the Hugging Face hub was skipped because {reason} (unset it to fetch {ref})")
    hub_split = ref.splits.get(split, split)
    _probe(ref, timeout)
    try:
        import datasets

        table = datasets.load_dataset(ref.repo, ref.config, split=hub_split)
    except Exception as exc:  # datasets raises many unrelated types (network, schema, scripts)
        raise HubUnavailable(f"loading {ref} split {hub_split!r} from the hub failed: {_short(exc)}") from exc
    logger.info("Loaded %d rows of %s [%s] from the Hugging Face hub", len(table), ref, hub_split)
    return [Row(f"{ref} [{hub_split}], row {i + 1}", item) for i, item in enumerate(table)]


def _probe(ref: HubRef, timeout: float) -> None:
    try:
        from huggingface_hub import HfApi

        HfApi().dataset_info(ref.repo, timeout=timeout)
    except Exception as exc:  # connection, timeout, 404 and auth errors all mean "not from the hub"
        raise HubUnavailable(f"the Hugging Face hub did not answer for {ref.repo}: {_short(exc)}") from exc


def _short(exc: BaseException) -> str:
    first_line = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {first_line[:200]}"
