"""Progress for the CLI: a bar on a terminal, plain lines otherwise.

`EventDisplay` renders the `teammed.events.Progress` events of run, compile, search, tune and
reproduce the same way: done/total, accuracy where the unit is a question, billable calls, tokens and $
so far against the budget, failures, an ETA, and the behaviour running; on a pipe a line per
finished unit and at least one every 30 s (a hung server too). `CallProgress` shows one
deliberation (``ask``) phase by phase, through DSPy callbacks, which also name the module running.

Only the CLI uses this module (output belongs to the CLI; library code emits events and logs).
"""

from __future__ import annotations

import contextlib
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Self, TextIO

from dspy.predict.predict import Predict
from dspy.utils.callback import BaseCallback

from teammed import usage as usage_mod

__all__ = ["EventDisplay", "CallProgress", "format_duration", "format_count"]


def format_duration(seconds: float | None) -> str:
    if seconds is None or seconds != seconds or seconds < 0:
        return "--:--"
    seconds = int(round(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 60:02d}:{seconds % 60:02d}"


def format_count(n: float) -> str:
    """12 -> '12', 12345 -> '12.3k', 1234567 -> '1.2M'."""
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f}M"
    if n >= 10_000:
        return f"{n / 1000:.0f}k"
    if n >= 1000:
        return f"{n / 1000:.1f}k"
    return str(int(n))


def _words(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name).lower().lstrip("_ ")


class _LiveCalls(BaseCallback):
    """Counts LM calls and tokens as they finish, and which behaviour each thread is in."""

    def __init__(self, on_change: Any) -> None:
        self.calls = 0
        self.tokens = 0
        self.phase = ""
        self._stacks: dict[int, list[str]] = {}
        self._names: dict[str, str] = {}
        self._seen: dict[int, int] = {}
        self._lock = threading.Lock()
        self._on_change = on_change

    def on_module_start(self, call_id: str, instance: Any, inputs: dict[str, Any]) -> None:
        cls = type(instance)
        # DSPy's own modules, and subclasses of its predictors (a behaviour's inner predictor), are
        # not phases: the behaviour around them is
        if cls.__module__.startswith("dspy.") or issubclass(cls, Predict):
            return
        with self._lock:
            stack = self._stacks.setdefault(threading.get_ident(), [])
            stack.append(call_id)
            name = getattr(instance, "name", None)  # a Behaviour carries its signature's name
            self._names[call_id] = name if isinstance(name, str) and name else cls.__name__
            self.phase = self._phase(stack)

    def on_module_end(self, call_id: str, outputs: Any, exception: Exception | None = None) -> None:
        with self._lock:
            if self._names.pop(call_id, None) is None:
                return
            stack = self._stacks.get(threading.get_ident(), [])
            if call_id in stack:
                stack.remove(call_id)
            if len(stack) > 1:
                self.phase = self._phase(stack)

    def _phase(self, stack: list[str]) -> str:
        """The two innermost modules below the program: ``discussion / discussion turn``."""
        names = [_words(self._names.get(c, "")) for c in stack[1:]][-2:]
        return " / ".join(n for n in names if n) or self.phase

    def on_lm_end(self, call_id: str, outputs: Any, exception: Exception | None = None) -> None:
        used = usage_mod.current()
        with self._lock:
            self.calls += 1
            if used is not None:
                now = used.prompt_tokens + used.completion_tokens
                key = id(used)
                self.tokens += max(0, now - self._seen.get(key, 0))
                self._seen[key] = now
                if len(self._seen) > 10_000:
                    self._seen.clear()
        self._on_change()


class _Display:
    """Writes a status either as a redrawn bar (terminal) or as occasional plain lines."""

    def __init__(self, stream: TextIO | None, *, tty: bool | None, interval_s: float, heartbeat_s: float) -> None:
        self.stream = stream if stream is not None else sys.stderr
        isatty = getattr(self.stream, "isatty", None)
        self.tty = bool(isatty and isatty()) if tty is None else tty
        self.interval_s = interval_s
        self.heartbeat_s = heartbeat_s
        self._last_draw = 0.0
        self.last_line_at = time.monotonic()
        self._width = 0
        self._lock = threading.Lock()

    def line(self, text: str) -> None:
        with self._lock:
            if self.tty and self._width:
                self.stream.write("\r" + " " * self._width + "\r")
                self._width = 0
            self.stream.write(text + "\n")
            self.stream.flush()
            self.last_line_at = time.monotonic()

    def heartbeat_due(self) -> bool:
        return not self.tty and time.monotonic() - self.last_line_at >= self.heartbeat_s

    def show(self, text: str, *, force: bool = False) -> None:
        """A status: redrawn on a terminal, else a plain line when ``force``d or a heartbeat is due."""
        if self.tty:  # redrawn in place, at most once an interval unless forced
            now = time.monotonic()
            with self._lock:
                if not force and now - self._last_draw < self.interval_s:
                    return
                self._last_draw = now
                pad = " " * max(0, self._width - len(text))
                self._width = len(text)
                self.stream.write("\r" + text + pad)
                self.stream.flush()
        elif force or self.heartbeat_due():
            self.line("  " + text)

    def close(self) -> None:
        with self._lock:
            if self.tty and self._width:
                self.stream.write("\n")
                self.stream.flush()
                self._width = 0


class CallProgress:
    """``ask``: what is running, calls and tokens so far, time elapsed. Installs the live-call counter, as
    DSPy callbacks (module phases, for one deliberation), for the duration of a ``with`` block."""

    def __init__(self, label: str, *, stream: TextIO | None = None, tty: bool | None = None,
                 interval_s: float = 0.2, heartbeat_s: float = 30.0, phase_lines: bool = False) -> None:
        self.display = _Display(stream, tty=tty, interval_s=interval_s, heartbeat_s=heartbeat_s)
        self.live = _LiveCalls(self._changed)
        self.started = time.monotonic()
        self._installed = False
        self.label = label
        self.phase_lines = phase_lines  # plain output: a line per phase change (one question), else heartbeats
        self._last_phase = ""

    def __enter__(self) -> Self:
        import dspy
        from dspy.dsp.utils.settings import main_thread_config

        self.started = time.monotonic()
        self._stack = contextlib.ExitStack()
        callbacks = [*(dspy.settings.get("callbacks") or []), self.live]
        # this thread (which may sit inside a dspy.context that snapshotted the settings) ...
        self._stack.enter_context(dspy.context(callbacks=callbacks))
        try:  # ... and worker threads, which read the global settings; only the CLI's main thread gets here
            dspy.settings.configure(callbacks=[*(main_thread_config.get("callbacks") or []), self.live])
            self._installed = True
        except RuntimeError:  # another thread owns DSPy's settings: workers report per question only
            self._installed = False
        return self

    def __exit__(self, *exc: object) -> None:
        import dspy

        self._stack.close()
        if self._installed:
            from dspy.dsp.utils.settings import main_thread_config

            remaining = [c for c in (main_thread_config.get("callbacks") or []) if c is not self.live]
            dspy.settings.configure(callbacks=remaining)
        self.display.close()

    def _changed(self) -> None:  # an LM call finished
        phase = self.live.phase
        if self.phase_lines and not self.display.tty and phase and phase != self._last_phase:
            self._last_phase = phase  # plain output: one line per phase change
            self.display.line("  " + self.status())
        else:
            self.display.show(self.status())

    def status(self) -> str:
        phase = f" | phase: {self.live.phase}" if self.live.phase else ""
        return (f"{self.label}{phase} | {self.live.calls} billable calls | {format_count(self.live.tokens)} billable "
                f"tokens | "
                f"{format_duration(time.monotonic() - self.started)} elapsed")


class EventDisplay:
    """Renders `teammed.events.Progress` events, the same way for every long command: on a terminal a
    line redrawn in place (a unit's start on a line of its own); on a pipe a plain line per finished
    unit, and at least one every ``heartbeat_s`` seconds while work goes on (a call, or nothing at all:
    a hung server is not silence)."""

    def __init__(self, stream: TextIO | None = None, *, tty: bool | None = None, interval_s: float = 0.2,
                 heartbeat_s: float = 30.0, width: int = 24) -> None:
        self.display = _Display(stream, tty=tty, interval_s=interval_s, heartbeat_s=heartbeat_s)
        self.width = width
        self.last: Any = None
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    def __call__(self, event: Any) -> None:
        self.last = event
        if event.kind in ("start", "finish"):
            return
        if event.kind == "begin":
            self.display.line(event.label)
        else:  # a finished unit is always shown, an LM call as often as the display allows
            self.display.show(self.status(event), force=event.kind != "call")

    def __enter__(self) -> Self:
        if not self.display.tty:  # a pipe hears from a silent piece of work too
            self._ticker = threading.Thread(target=self._tick, name="teammed-progress", daemon=True)
            self._ticker.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join(timeout=1.0)
        self.display.close()

    def _tick(self) -> None:
        while not self._stop.wait(min(5.0, self.display.heartbeat_s)):
            event = self.last
            if event is not None and event.kind != "finish" and self.display.heartbeat_due():
                waited = time.monotonic() - self.display.last_line_at
                self.display.line(f"  {self.status(event)} | still working ({format_duration(waited)} since the "
                                  f"last line)")

    def relaying_output(self, prefix: str = "") -> contextlib.AbstractContextManager[None]:
        return relaying(self.display, prefix)

    def status(self, e: Any) -> str:
        parts = [e.label]
        if e.total:
            filled = int(round(min(1.0, (e.done or 0) / e.total) * self.width))
            parts.append(f"[{'#' * filled}{'-' * (self.width - filled)}] {e.done or 0}/{e.total}")
        if e.accuracy is not None:
            parts.append(f"accuracy {e.accuracy:.1%}")
        parts += _spending(e.spent, e.budget)
        if e.failed or e.accuracy is not None:  # questions: how many failed, 0 included
            parts.append(f"{e.failed} failed")
        parts.append(f"ETA {format_duration(e.eta_s)}")
        if e.phase and e.kind == "call" and (e.total is None or (e.done or 0) < e.total):
            parts.append(f"in: {_words(e.phase)}")
        return " | ".join(parts)


def _spending(spent: Any, limits: Any) -> list[str]:
    """Billable calls, tokens and dollars (cache hits included, each named so), each with its limit when the
    budget has one (dollars only when some were spent or limited)."""
    parts = [f"{spent.calls} billable calls" + (f" of {format_count(limits.calls)}" if limits and limits.calls else ""),
             f"{format_count(spent.tokens)} billable tokens"
             + (f" of {format_count(limits.tokens)}" if limits and limits.tokens else "")]
    if spent.usd is not None and (spent.usd or (limits and limits.usd)):
        parts.append(f"${spent.usd:.4f}" + (f" of ${limits.usd:g}" if limits and limits.usd else ""))
    return parts


@contextlib.contextmanager
def relaying(display: _Display, prefix: str) -> Iterator[None]:
    """While inside, what a library prints to stdout/stderr comes out as lines of ``display`` (``prefix``
    first) and its own progress bars (redrawn with carriage returns) are dropped: one display on the
    terminal, not two fighting over the line."""
    relay = _LineRelay(lambda text: display.line("  " + prefix + text))
    with contextlib.redirect_stdout(relay), contextlib.redirect_stderr(relay):  # type: ignore[type-var]
        try:
            yield
        finally:
            relay.flush_line()


@contextlib.contextmanager
def quiet_libraries() -> Iterator[None]:
    """The command line's own, never the library's: while inside, what third-party libraries print to stdout
    (DSPy's "Bootstrapped ...") goes to the debug log, for stdout carries results, and their tqdm bars are
    off, for the command draws its own progress. From Python, DSPy's output is the caller's to keep or hide
    (``TQDM_DISABLE=1`` before importing it turns the bars off)."""
    import logging

    import tqdm

    original = tqdm.tqdm.__init__

    def quiet(self: Any, *args: Any, **kwargs: Any) -> None:
        kwargs["disable"] = True
        original(self, *args, **kwargs)

    relay = _LineRelay(lambda text: logging.getLogger("teammed.libraries").debug("%s", text))
    tqdm.tqdm.__init__ = quiet  # type: ignore[method-assign]
    try:
        with contextlib.redirect_stdout(relay):  # type: ignore[type-var]
            yield
    finally:
        tqdm.tqdm.__init__ = original  # type: ignore[method-assign]
        relay.flush_line()


class _LineRelay:
    """A write-only text stream that hands complete lines to ``emit``; a line redrawn with carriage
    returns (a progress bar) is dropped."""

    def __init__(self, emit: Callable[[str], None]) -> None:
        self._emit = emit
        self._pending = ""
        self._lock = threading.Lock()

    def write(self, text: str) -> int:
        with self._lock:
            *lines, self._pending = (self._pending + text).split("\n")
        for line in lines:
            self._relay(line)
        return len(text)

    def _relay(self, line: str) -> None:
        if "\r" not in line and line.strip():
            self._emit(line.rstrip())

    def flush_line(self) -> None:
        with self._lock:
            line, self._pending = self._pending, ""
        self._relay(line)

    def flush(self) -> None:  # what print(..., flush=True) and tqdm call
        pass

    def isatty(self) -> bool:
        return False
