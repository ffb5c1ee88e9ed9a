"""Progress: the bar on a terminal, plain lines otherwise, live calls and a calls-based ETA."""

from __future__ import annotations

import io

import pytest

from teammed import events
from teammed.cli import main
from teammed.config import preset
from teammed.events import Tracker
from teammed.programs.accounting import expected_calls_per_question
from teammed.progress import CallProgress, EventDisplay, format_count, format_duration


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch) -> Clock:
    c = Clock()
    monkeypatch.setattr("teammed.progress.time.monotonic", c)
    monkeypatch.setattr("teammed.events.time.monotonic", c)
    return c


def _tracker(*, total: int, unit_calls: float | None, concurrency: int = 1, stream=None, tty=False,
             heartbeat_s: float = 30.0) -> tuple[Tracker, EventDisplay]:
    display = EventDisplay(stream or io.StringIO(), tty=tty, heartbeat_s=heartbeat_s, width=8)
    tracker = Tracker("run", display, unit_calls=unit_calls, concurrency=concurrency)
    tracker.step("begin", "base | demo | seed 111", done=0, total=total)
    return tracker, display


def _call(tracker: Tracker, latency_s: float, tokens: int = 10) -> None:
    tracker.call_finished("Sig", tokens=tokens, latency_s=latency_s, prompt_tokens=tokens, completion_tokens=0)


def _simulate(tracker: Tracker, clock: Clock, *, total: int, concurrency: int, calls_each: int,
              call_s: float) -> tuple[list[tuple[float, float | None]], float]:
    """Questions in waves of ``concurrency``; every call takes ``call_s``. Returns (elapsed, eta) pairs."""
    seen = []
    done = 0
    start = clock.now
    finished_calls = 0
    while done < total:
        wave = min(concurrency, total - done)
        for _ in range(calls_each):
            clock.now += call_s
            for _ in range(wave):
                _call(tracker, call_s)
            seen.append((clock.now - start, tracker.eta_s()))
        for _ in range(wave):
            done += 1
            finished_calls += calls_each
            tracker.step("question", done=done, total=total, accuracy=0.5, failed=0, calls=finished_calls)
    return seen, clock.now - start


def test_first_eta_is_close_with_concurrency(clock):
    # teamwork base, 3 agents: the accounting formula's calls per question
    per_question = expected_calls_per_question(preset("base", n_agents=3), system="teamwork")
    assert per_question == 3 + 3 * 2  # N + N*T
    total, concurrency = 12, 4
    tracker, _ = _tracker(total=total, unit_calls=per_question, concurrency=concurrency)
    seen, duration = _simulate(tracker, clock, total=total, concurrency=concurrency, calls_each=9, call_s=2.0)
    first_elapsed, first_eta = seen[0]  # after the first calls: workers / mean call latency
    truth = duration - first_elapsed
    assert first_eta is not None and truth / 1.5 <= first_eta <= truth * 1.5, (first_eta, truth)
    for elapsed, eta in seen:  # every estimate stays within 1.5x of the truth
        remaining = duration - elapsed
        if remaining > 0:
            assert remaining / 1.5 <= eta <= remaining * 1.5 + 2.0, (elapsed, eta, remaining)


def test_a_grid_s_next_cell_starts_with_no_accuracy_and_an_eta_of_its_own(clock):
    """The second cell of a grid: the first cell's accuracy is not shown as the new one's, and the first cell's
    calls are not taken for calls in flight (which made its ETA 00:00)."""
    per_question = expected_calls_per_question(preset("base", n_agents=3), system="teamwork")
    tracker, _ = _tracker(total=3, unit_calls=per_question)
    _simulate(tracker, clock, total=3, concurrency=1, calls_each=9, call_s=2.0)
    tracker.step("begin", "leadership | demo | seed 111", done=0, total=3)
    event = tracker.event("begin")
    assert event.accuracy is None and event.failed == 0 and event.spent.calls == 27  # the command's spend
    for _ in range(3):
        clock.now += 2.0
        _call(tracker, 2.0)
    assert tracker.eta_s() == pytest.approx((3 * 9 - 3) * 2.0, rel=0.2)


def test_eta_without_a_formula_comes_from_observed_calls(clock):
    tracker, _ = _tracker(total=4, unit_calls=None)
    assert tracker.eta_s() is None  # nothing known yet: no invented number
    seen, duration = _simulate(tracker, clock, total=4, concurrency=1, calls_each=3, call_s=1.0)
    estimates = [(elapsed, eta) for elapsed, eta in seen if eta is not None]
    elapsed, first = estimates[0]  # no formula: known once the first question finished (3 calls)
    assert elapsed == 4.0 and first == pytest.approx(duration - elapsed, rel=0.01)


def test_eta_of_planned_work_comes_from_the_call_rate(clock):
    tracker = Tracker("tune", None, planned_calls=100)
    for _ in range(10):
        clock.now += 1.0
        _call(tracker, 1.0)
    assert tracker.eta_s() == pytest.approx(90.0, rel=0.15)  # 90 calls left at one a second


def test_plain_lines_when_not_a_terminal(clock):
    stream = io.StringIO()
    tracker, _ = _tracker(total=2, unit_calls=5, stream=stream)
    for _ in range(5):
        _call(tracker, 0.1, tokens=2469)
    tracker.step("question", done=1, total=2, accuracy=1.0, failed=0, calls=5)
    text = stream.getvalue()
    assert "\r" not in text and text.endswith("\n") and text.startswith("base | demo | seed 111\n")
    assert "1/2" in text and "accuracy 100.0%" in text and "5 billable calls" in text and "12k billable tokens" in text
    assert "ETA" in text and "0 failed" in text


def test_bar_redraws_in_place_on_a_terminal(clock):
    stream = io.StringIO()
    tracker, display = _tracker(total=4, unit_calls=5, stream=stream, tty=True)
    with display:
        tracker.step("question", done=1, total=4, accuracy=0.0, failed=1, calls=5)
        tracker.step("question", done=2, total=4, accuracy=0.5, failed=1, calls=10)
    text = stream.getvalue()
    assert text.count("\r") >= 2 and text.endswith("\n")
    assert "[####----] 2/4" in text and "1 failed" in text


def test_heartbeat_lines_inside_a_long_question(clock):
    stream = io.StringIO()
    tracker, _ = _tracker(total=1, unit_calls=40, stream=stream, heartbeat_s=30)
    stream.truncate(0), stream.seek(0)
    tracker.call_started("DiscussionTurn")
    _call(tracker, 0.1)  # 0 s: too soon for a line
    assert stream.getvalue() == ""
    clock.now += 31
    _call(tracker, 0.1)
    assert "in: discussion turn" in stream.getvalue() and "2 billable calls" in stream.getvalue()


def test_a_pipe_hears_from_a_silent_piece_of_work(monkeypatch):
    """No call finishes (a hung server): the display still writes a line every heartbeat."""
    stream = io.StringIO()
    display = EventDisplay(stream, tty=False, heartbeat_s=0.05)
    with display:
        display(events.Progress(command="tune", kind="begin", label="tune: stage 1 of 4"))
        display(events.Progress(command="tune", kind="cell", label="tune: stage 1 of 4", done=1, total=5,
                                budget=events.Limits(calls=800)))
        import time

        time.sleep(0.4)
    lines = stream.getvalue().splitlines()
    assert sum("still working" in line for line in lines) >= 2, lines
    assert "1/5" in lines[-1] and "0 billable calls of 800" in lines[-1]


def test_formats():
    assert format_duration(None) == "--:--"
    assert format_duration(75) == "01:15"
    assert format_duration(3 * 3600 + 120) == "3h02m"
    assert [format_count(n) for n in (12, 1234, 12345, 1_234_567)] == ["12", "1.2k", "12k", "1.2M"]


def test_ask_shows_phases_and_calls(capsys):
    assert main(["ask", "Most likely diagnosis?", "--option", "A=MI", "--option", "B=PE", "--preset", "all",
                 "--n-agents", "3", "--model", "scripted"]) == 0
    err = capsys.readouterr().err
    assert "phase: recruitment" in err and "phase: discussion" in err and "calls" in err


def test_run_prints_progress_lines(tmp_path, capsys):
    assert main(["run", "--dataset", "demo", "--n", "3", "--model", "scripted", "--out", str(tmp_path / "r")]) == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if "accuracy" in line and "ETA" in line]
    assert len(lines) == 3 and "3/3" in lines[-1]


def test_call_progress_counts_calls(clock):
    stream = io.StringIO()
    with CallProgress("compile", stream=stream, tty=False, heartbeat_s=0) as bar:
        bar.live.on_lm_end("x", None)
    assert "compile" in stream.getvalue() and "1 billable calls" in stream.getvalue()


def test_a_library_s_prints_become_lines_and_its_progress_bars_are_dropped():
    from teammed.progress import EventDisplay

    out = io.StringIO()
    with EventDisplay(stream=out, tty=False) as display, display.relaying_output("dspy: "):  # as compile relays
        import sys

        print("Bootstrapped 2 full traces.")
        sys.stderr.write("\r  0%|          | 0/3 [00:00<?, ?it/s]\r100%|##########| 3/3 [00:00<00:00, 114.57it/s]\n")
        print("Average Metric: 2 / 3", end="")  # an unfinished line still comes out when the block ends
    text = out.getvalue()
    assert "  dspy: Bootstrapped 2 full traces.\n" in text and "  dspy: Average Metric: 2 / 3\n" in text
    assert "it/s" not in text and "\r" not in text


def test_compile_shows_dspy_s_messages_as_its_own_lines(tmp_path, capsys):
    code = main(["compile", "--dataset", "demo", "--optimizer", "bootstrap", "--train", "3", "--val", "2",
                 "--test", "1", "--model", "scripted", "--no-cache", "--out", str(tmp_path / "p")])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "  dspy: Bootstrapped" in captured.err and "it/s" not in captured.err + captured.out
