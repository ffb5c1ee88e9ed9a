"""Interpreter settings for a long question phase.

Python's cyclic garbage collector runs whenever 700 more container objects have been made than
freed, in whichever thread made the last one, holding the GIL. During a run that is every few
LM calls. Each full collection walks every object alive, and after the imports (DSPy, pydantic,
httpx, litellm's tables) those are mostly objects that live as long as the process. At 256
questions in flight on a 0.5 s server, 4,608 calls, the collector's callbacks timed 1.3 s of
CPU out of the run's 10.7 s; with this, 0.75 s (the reference cycles each call then made were
still there; without them, 0.28 s).

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
_depth = 0  # blocks open: the first sets, the last restores
_saved: tuple[tuple[int, ...], bool] | None = None  # the thresholds found, and whether the first block froze


@contextlib.contextmanager
def quiet_collector(young: int = YOUNG_THRESHOLD) -> Iterator[None]:
    """Freeze what is alive now and collect the young generation every ``young`` allocations,
    until the block ends; then the previous thresholds, and the frozen objects collectable again.

    Blocks may nest or overlap in threads: the first to open sets, and the last to end restores.
    It changes nothing while the collector is disabled (``gc.disable()``), and freezes nothing
    when the program has frozen objects itself (`gc.freeze` before forking workers, say): those
    stay frozen after the block."""
    global _depth, _saved
    with _lock:
        if _depth == 0:
            _saved = None
            if gc.isenabled():
                freeze = gc.get_freeze_count() == 0
                _saved = (gc.get_threshold(), freeze)
                if freeze:
                    gc.collect()
                    gc.freeze()
                before = _saved[0]
                gc.set_threshold(max(young, before[0]), *before[1:])
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _saved is not None:
                thresholds, froze = _saved
                gc.set_threshold(*thresholds)
                if froze:
                    gc.unfreeze()
                _saved = None
