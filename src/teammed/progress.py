"""Progress for the CLI: a bar on a terminal, plain lines otherwise.

A run shows questions done, accuracy, LM calls, tokens, failures and an ETA; inside a
question it shows the phase (the behaviour module running) and calls so far, so a long
deliberation, ``compile`` or ``ask`` is never silent. LM calls are counted live (``run``: a
`teammed.usage` listener; ``ask`` and ``compile``: DSPy callbacks, which also name the module
running), so the ETA is calls-based from the first call: expected calls per question
(``expected_calls``, which the CLI takes from the teamwork formula,
`teammed.programs.accounting.expected_calls_per_question`; observed ones once questions
finish) divided by the observed call rate, which already reflects concurrency.

Only the CLI uses this module (output belongs to the CLI; library code logs).
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

__all__ = ["RunProgress", "CallProgress", "format_duration", "format_count"]


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
        # The call rate is measured from the moment `ramp_threshold` calls (one per worker) have
        # finished: setup, the first (warm-up) call and workers starting unevenly are excluded.
        self.ramp_threshold = 1
        self.ramp_at: float | None = None
        self.ramp_calls = 0
        self._stacks: dict[int, list[str]] = {}
        self._names: dict[str, str] = {}
        self._started: dict[str, float] = {}
        self._latencies: list[float] = []
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

    def on_lm_start(self, call_id: str, instance: Any, inputs: dict[str, Any]) -> None:
        with self._lock:
            self._started[call_id] = time.monotonic()

    # `teammed.usage.CallListener`: the cheap feed `run` uses (no DSPy callbacks; the phase is the
    # behaviour whose call started last)
    def call_started(self, signature: str) -> None:
        self.phase = _words(signature)

    def call_finished(self, signature: str, *, tokens: int, latency_s: float) -> None:
        with self._lock:
            if len(self._latencies) < 100_000:
                self._latencies.append(latency_s)
            self._count_call()
            self.tokens += tokens
        self._on_change()

    def _count_call(self) -> None:
        self.calls += 1
        if self.ramp_at is None and self.calls >= self.ramp_threshold:
            self.ramp_at, self.ramp_calls = time.monotonic(), self.calls

    def mean_latency(self) -> float | None:
        """Seconds per LM call so far, the first (warm-up) call left out once there are others."""
        with self._lock:
            latencies = self._latencies[1:] if len(self._latencies) > 1 else self._latencies
            return sum(latencies) / len(latencies) if latencies else None

    def on_lm_end(self, call_id: str, outputs: Any, exception: Exception | None = None) -> None:
        used = usage_mod.current()
        with self._lock:
            began = self._started.pop(call_id, None)
            if began is not None and len(self._latencies) < 100_000:
                self._latencies.append(time.monotonic() - began)
            self._count_call()
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
        self._last_line = time.monotonic()
        self._width = 0
        self._lock = threading.Lock()

    def draw(self, text: str, *, force: bool = False) -> None:
        now = time.monotonic()
        with self._lock:
            if not force and now - self._last_draw < self.interval_s:
                return
            self._last_draw = now
            pad = " " * max(0, self._width - len(text))
            self._width = len(text)
            self.stream.write("\r" + text + pad)
            self.stream.flush()

    def line(self, text: str) -> None:
        with self._lock:
            if self.tty and self._width:
                self.stream.write("\r" + " " * self._width + "\r")
                self._width = 0
            self.stream.write(text + "\n")
            self.stream.flush()
            self._last_line = time.monotonic()

    def heartbeat_due(self) -> bool:
        return not self.tty and time.monotonic() - self._last_line >= self.heartbeat_s

    def close(self) -> None:
        with self._lock:
            if self.tty and self._width:
                self.stream.write("\n")
                self.stream.flush()
                self._width = 0


class _Progress:
    """Installs the live-call counter for the duration of a ``with`` block: as DSPy callbacks (module
    phases, for one deliberation) or, with ``dspy_callbacks`` false, as a cheap `teammed.usage` listener."""

    dspy_callbacks = True

    def __init__(self, stream: TextIO | None, *, tty: bool | None, interval_s: float, heartbeat_s: float) -> None:
        self.display = _Display(stream, tty=tty, interval_s=interval_s, heartbeat_s=heartbeat_s)
        self.live = _LiveCalls(self._changed)
        self.started = time.monotonic()
        self._installed = False

    def __enter__(self) -> Self:
        import dspy
        from dspy.dsp.utils.settings import main_thread_config

        self.started = time.monotonic()
        self._stack = contextlib.ExitStack()
        if not self.dspy_callbacks:
            self._stack.enter_context(usage_mod.listen(self.live))
            self._installed = False
            return self
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

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def _changed(self) -> None:  # an LM call finished
        if self.display.tty:
            self.display.draw(self.status())
        elif self.display.heartbeat_due():
            self.display.line("  " + self.status())

    def status(self) -> str:
        raise NotImplementedError


class CallProgress(_Progress):
    """``ask`` and ``compile``: what is running, calls and tokens so far, time elapsed."""

    def __init__(self, label: str, *, stream: TextIO | None = None, tty: bool | None = None,
                 interval_s: float = 0.2, heartbeat_s: float = 30.0, phase_lines: bool = False) -> None:
        super().__init__(stream, tty=tty, interval_s=interval_s, heartbeat_s=heartbeat_s)
        self.label = label
        self.phase_lines = phase_lines  # plain output: a line per phase change (one question), else heartbeats
        self._last_phase = ""

    def set_label(self, label: str) -> None:
        self.label = label
        if self.display.tty:
            self.display.draw(self.status(), force=True)
        else:
            self.display.line("  " + self.status())

    @contextlib.contextmanager
    def relaying_output(self, prefix: str = "dspy: ") -> Iterator[None]:
        """While inside, what a library prints to stdout/stderr comes out as lines of this display
        (``prefix`` first) and its own progress bars (redrawn with carriage returns) are dropped:
        one display on the terminal, not two fighting over the line."""
        relay = _LineRelay(lambda text: self.display.line("  " + prefix + text))
        with contextlib.redirect_stdout(relay), contextlib.redirect_stderr(relay):  # type: ignore[type-var]
            try:
                yield
            finally:
                relay.flush_line()

    def _changed(self) -> None:
        phase = self.live.phase
        if self.phase_lines and not self.display.tty and phase and phase != self._last_phase:
            self._last_phase = phase  # plain output: one line per phase change
            self.display.line("  " + self.status())
            return
        super()._changed()

    def status(self) -> str:
        phase = f" | phase: {self.live.phase}" if self.live.phase else ""
        return (f"{self.label}{phase} | {self.live.calls} calls | {format_count(self.live.tokens)} tokens | "
                f"{format_duration(self.elapsed())} elapsed")


class RunProgress(_Progress):
    """``run``: a bar with questions done, accuracy, calls, tokens, failures and ETA.

    ``update`` takes the runner's per-question stats (``done``, ``total``, ``accuracy``,
    ``calls``, ``failed``); between questions the live call count moves the bar's numbers.
    Calls are counted through a `teammed.usage` listener, not DSPy callbacks, which would cost
    every call of a long run the inspection of each module's arguments.
    """

    dspy_callbacks = False

    def __init__(self, *, total: int, expected_calls: float | None = None, concurrency: int = 1,
                 stream: TextIO | None = None, tty: bool | None = None, interval_s: float = 0.2,
                 heartbeat_s: float = 30.0, width: int = 24) -> None:
        super().__init__(stream, tty=tty, interval_s=interval_s, heartbeat_s=heartbeat_s)
        self.total = total
        self.expected_calls = expected_calls
        self.concurrency = max(1, concurrency)
        self.live.ramp_threshold = self.concurrency
        self.width = width
        self.done = 0
        self.failed = 0
        self.accuracy: float | None = None
        self._session_done = 0
        self._session_row_calls = 0
        self._prev_calls: int | None = None
        self._row_calls = 0

    def update(self, stats: dict[str, Any]) -> None:
        """One question finished (the runner's progress callback)."""
        done, calls = int(stats["done"]), int(stats.get("calls", 0))
        if self._prev_calls is None:  # rows from an earlier session (resume): estimate their share
            self._prev_calls = round(calls * (done - 1) / done) if done > 1 else 0
        self._session_row_calls += calls - self._prev_calls
        self._prev_calls = calls
        self._row_calls = calls
        self._session_done += 1
        self.done, self.total = done, int(stats.get("total", self.total))
        self.failed = int(stats.get("failed", 0))
        self.accuracy = float(stats.get("accuracy", 0.0))
        if self.display.tty:
            self.display.draw(self.status(), force=True)
        else:
            self.display.line("  " + self.status())

    def per_question_calls(self) -> float | None:
        """Observed mean calls per finished question once there is one, else the formula's."""
        if self._session_done and self._session_row_calls:
            return self._session_row_calls / self._session_done
        return self.expected_calls

    def eta_s(self) -> float | None:
        """Remaining calls divided by the call rate.

        Until the first question of this session finishes, the rate is (workers busy) / (mean call
        latency): right from the first calls, however unevenly the workers started. Afterwards it
        is the observed rate since every worker had finished one call, which includes the time
        between calls as well.
        """
        per_question = self.per_question_calls()
        live = self.live
        if not per_question or not live.calls:
            if self._session_done:  # no live counts: questions per second (concurrency included)
                return self.elapsed() / self._session_done * (self.total - self.done)
            return None
        in_flight = max(0, live.calls - self._session_row_calls)
        remaining = max(0.0, per_question * (self.total - self.done) - in_flight)
        workers = max(1, min(self.concurrency, self.total - self.done))
        if self._session_done and live.ramp_at is not None and live.calls > live.ramp_calls:
            rate = (live.calls - live.ramp_calls) / max(1e-9, time.monotonic() - live.ramp_at)
            return remaining / rate
        latency = live.mean_latency()
        return remaining * latency / workers if latency is not None else None

    def status(self) -> str:
        share = self.done / self.total if self.total else 1.0
        filled = int(round(share * self.width))
        bar = "#" * filled + "-" * (self.width - filled)
        accuracy = f"{self.accuracy:.1%}" if self.accuracy is not None else "--"
        phase = f" | in: {self.live.phase}" if self.live.phase and self.done < self.total else ""
        calls = self.live.calls or self._row_calls
        return (f"[{bar}] {self.done}/{self.total} | accuracy {accuracy} | {calls} calls | "
                f"{format_count(self.live.tokens)} tokens | {self.failed} failed | "
                f"ETA {format_duration(self.eta_s())}{phase}")


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
