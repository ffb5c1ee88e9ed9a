"""Retry policy for transient backend failures (pure, so it can be tested by hand).

The spec's §6.1: wait ``min(base · 2^k, cap) · U(0.8, 1.2)`` seconds before attempt
``k + 1``; a server's ``Retry-After`` wins when it says more, but never beyond ``cap``.

Worst case of one call with the defaults (4 attempts, base 2 s, cap 30 s, --timeout 120 s):
4 × 120 s of hung requests + 3 waits of at most 30 s (a server's Retry-After is capped at
--retry-cap; without one the waits are 2.4 + 4.8 + 9.6 s) = 570 s, 9.5 minutes.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

__all__ = ["RetryPolicy"]


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 4
    base_s: float = 2.0
    cap_s: float = 30.0
    jitter: tuple[float, float] = (0.8, 1.2)
    # calls in a row that still failed after every attempt before the backend gives up on the server
    # (`FatalBackendError`, kind "unavailable"), so no command retries a dead server for ever; 0: never
    give_up_after: int = 5

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"attempts must be at least 1 (got {self.attempts})")
        if self.give_up_after < 0:
            raise ValueError(f"give_up_after must be 0 (never) or more (got {self.give_up_after})")
        if self.base_s < 0 or self.cap_s < 0:
            raise ValueError("base_s and cap_s must not be negative")

    def delay(self, retry_index: int, *, retry_after: float | None = None, rng: random.Random | None = None) -> float:
        """Seconds to wait before retry number ``retry_index`` (0 for the first retry)."""
        backoff = min(self.base_s * 2**retry_index, self.cap_s) * (rng or random).uniform(*self.jitter)
        if retry_after is not None and retry_after > backoff:
            return min(retry_after, self.cap_s)
        return backoff

    def worst_case_s(self, timeout_s: float) -> float:
        """The longest one call can take: every attempt hangs to the timeout, every wait is maximal."""
        waits = sum(max(min(self.base_s * 2**k, self.cap_s) * self.jitter[1], self.cap_s)
                    for k in range(self.attempts - 1))
        return self.attempts * timeout_s + waits
