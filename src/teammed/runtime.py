"""Interpreter settings for a long question phase.

Python's cyclic garbage collector runs whenever 700 more container objects have been made than
freed, in whichever thread made the last one, holding the GIL. During a run that is every few
LM calls. Each full collection walks every object alive, and after the imports (DSPy, pydantic,
httpx, litellm's tables) those are mostly objects that live as long as the process. At 256
questions in flight on a 0.5 s server the collector took about 1.3 s of CPU out of 10 for 4,608
calls (``benchmarks/runtime_arms.py``).

`quiet_collector` is what `teammed run` does around its question phase: it collects once, moves
every object then alive to the permanent generation (`gc.freeze`), so that later collections no
longer walk it, and starts a young collection every 10,000 allocations rather than 700. Cycles
are still collected; the objects frozen are never freed before `gc.unfreeze`, which the context
manager calls on exit (with the thresholds it found).

    with teammed.runtime.quiet_collector():
        run_questions(...)
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

__all__ = ["YOUNG_THRESHOLD", "quiet_collector"]

YOUNG_THRESHOLD = 10_000  # allocations between young collections (Python's default: 700)

_lock = threading.Lock()
_depth = 0  # blocks open: only the outermost freezes and unfreezes


@contextlib.contextmanager
def quiet_collector(young: int = YOUNG_THRESHOLD) -> Iterator[None]:
    """Freeze what is alive now and collect the young generation every ``young`` allocations,
    until the block ends; then the previous thresholds, and the frozen objects collectable again.

    Blocks may nest or overlap in threads: the outermost one sets and restores. It does nothing
    when the collector is disabled (``gc.disable()``)."""
    global _depth
    with _lock:
        outer = _depth == 0 and gc.isenabled()
        _depth += 1
        before = gc.get_threshold()
        if outer:
            gc.collect()
            gc.freeze()
            gc.set_threshold(max(young, before[0]), *before[1:])
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if outer:
                gc.set_threshold(*before)
                gc.unfreeze()
