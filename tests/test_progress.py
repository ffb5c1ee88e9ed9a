"""Progress: the bar on a terminal, plain lines otherwise, live calls and a calls-based ETA."""

from __future__ import annotations

import io

import pytest

from teammed.cli import main
from teammed.config import preset
from teammed.programs.accounting import expected_calls_per_question
from teammed.progress import CallProgress, RunProgress, format_count, format_duration


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch) -> Clock:
    c = Clock()
    monkeypatch.setattr("teammed.progress.time.monotonic", c)
    return c


def _simulate(bar: RunProgress, clock: Clock, *, total: int, concurrency: int, calls_each: int,
              call_s: float) -> tuple[list[tuple[float, float | None]], float]:
    """Questions in waves of ``concurrency``; every call takes ``call_s``. Returns (elapsed, eta) pairs."""
    seen = []
    done = 0
    start = clock.now
    finished_calls = 0
    while done < total:
        wave = min(concurrency, total - done)
        for step in range(calls_each):
            ids = [f"{done}-{step}-{w}" for w in range(wave)]
            for call_id in ids:
                bar.live.on_lm_start(call_id, None, {})
            clock.now += call_s
            for call_id in ids:
                bar.live.on_lm_end(call_id, None)
            seen.append((clock.now - start, bar.eta_s()))
        for _ in range(wave):
            done += 1
            finished_calls += calls_each
            bar.update({"done": done, "total": total, "accuracy": 0.5, "calls": finished_calls, "failed": 0})
    return seen, clock.now - start


def test_first_eta_is_close_with_concurrency(clock):
    # teamwork base, 3 agents: the accounting formula's calls per question
    per_question = expected_calls_per_question(preset("base", n_agents=3), system="teamwork")
    assert per_question == 3 + 3 * 2  # N + N*T
    total, concurrency = 12, 4
    bar = RunProgress(total=total, expected_calls=per_question, concurrency=concurrency,
                      stream=io.StringIO(), tty=False)
    seen, duration = _simulate(bar, clock, total=total, concurrency=concurrency, calls_each=9, call_s=2.0)
    first_elapsed, first_eta = seen[0]  # after the first calls: workers / mean call latency
    truth = duration - first_elapsed
    assert first_eta is not None and truth / 1.5 <= first_eta <= truth * 1.5, (first_eta, truth)
    for elapsed, eta in seen:  # every estimate stays within 1.5x of the truth
        remaining = duration - elapsed
        if remaining > 0:
            assert remaining / 1.5 <= eta <= remaining * 1.5 + 2.0, (elapsed, eta, remaining)


def test_eta_without_a_formula_comes_from_observed_calls(clock):
    bar = RunProgress(total=4, expected_calls=None, stream=io.StringIO(), tty=False)
    assert bar.eta_s() is None  # nothing known yet: no invented number
    seen, duration = _simulate(bar, clock, total=4, concurrency=1, calls_each=3, call_s=1.0)
    estimates = [(elapsed, eta) for elapsed, eta in seen if eta is not None]
    elapsed, first = estimates[0]  # no formula: known once the first question finished (3 calls)
    assert elapsed == 4.0 and first == pytest.approx(duration - elapsed, rel=0.01)


def test_plain_lines_when_not_a_terminal(clock):
    stream = io.StringIO()
    bar = RunProgress(total=2, expected_calls=5, stream=stream, tty=False)
    bar.live.calls, bar.live.tokens = 5, 12345
    bar.update({"done": 1, "total": 2, "accuracy": 1.0, "calls": 5, "failed": 0})
    text = stream.getvalue()
    assert "\r" not in text and text.endswith("\n")
    assert "1/2" in text and "accuracy 100.0%" in text and "5 calls" in text and "12k tokens" in text
    assert "ETA" in text and "0 failed" in text


def test_bar_redraws_in_place_on_a_terminal(clock):
    stream = io.StringIO()
    with RunProgress(total=4, expected_calls=5, stream=stream, tty=True, width=8) as bar:
        bar.update({"done": 1, "total": 4, "accuracy": 0.0, "calls": 5, "failed": 1})
        bar.update({"done": 2, "total": 4, "accuracy": 0.5, "calls": 10, "failed": 1})
    text = stream.getvalue()
    assert text.count("\r") >= 2 and text.endswith("\n")
    assert "[####----] 2/4" in text and "1 failed" in text


def test_heartbeat_lines_inside_a_long_question(clock):
    stream = io.StringIO()
    bar = RunProgress(total=1, expected_calls=40, stream=stream, tty=False, heartbeat_s=30)
    bar.live.phase = "discussion / discussion turn"
    bar.live.on_lm_end("a", None)  # 0 s: too soon for a line
    assert stream.getvalue() == ""
    clock.now += 31
    bar.live.on_lm_end("b", None)
    assert "in: discussion / discussion turn" in stream.getvalue() and "2 calls" in stream.getvalue()


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
        bar.set_label("compile: after")
    assert "compile: after" in stream.getvalue() and "1 calls" in stream.getvalue()


def test_a_library_s_prints_become_lines_and_its_progress_bars_are_dropped():
    from teammed.progress import CallProgress

    out = io.StringIO()
    with CallProgress("compile", stream=out, tty=False) as bar, bar.relaying_output():
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
