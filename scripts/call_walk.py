"""The walk a reader follows from the CLI to the first LM call: which of teammed's files it passes.

Runs one command in this process on the offline ``scripted`` model, records every call into
teammed's own files (``sys.setprofile``, worker threads included) until the scripted LM is first
asked, and prints two figures per command:

- the *stack*: teammed's files on the call stack at that first LM call, outermost first, and how
  many of its steps go up a layer (a lower layer calling into a higher one: a callback);
- the *walk*: every teammed file entered before that call, and the calls that went up a layer.

Layers, lowest first, as docs/architecture.md draws them: the core, signatures and data, programs,
evals, optimizers, the application (experiments, the CLI, the runner). Only function calls count
(not a module's or a class's body run by an import); a worker thread's stack continues the stack of
the code that handed it its work (a job of `teammed.interrupts.Workers`, or a thread it started).

    python scripts/call_walk.py compile run tune search
"""

from __future__ import annotations

import argparse
import contextvars
import functools
import inspect
import json
import os
import sys
import tempfile
import threading
from pathlib import Path
from types import FrameType
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import teammed  # noqa: E402

_ROOT = Path(teammed.__file__).resolve().parents[2]
_APPLICATION = ("src/teammed/experiments/", "src/teammed/cli", "src/teammed/runner.py")
_LAYERS = (("src/teammed/",), ("signatures/", "data/"), ("programs/",), ("evals/",), ("optimizers/",), _APPLICATION)

_COMMANDS = {
    "compile": ["compile", "--dataset", "{data}", "--optimizer", "bootstrap", "--train", "2", "--val", "1",
                "--test", "1", "--out", "{tmp}/program.json"],
    "run": ["run", "--dataset", "{data}", "--n", "2", "--preset", "base", "--out", "{tmp}/run"],
    "tune": ["tune", "--dataset", "{data}", "--out", "{tmp}/tune", "--budget", "calls=20000"],
    "search": ["search", "--dataset", "{data}", "--trials", "2", "--n", "2", "--storage", "{tmp}/study.log"],
}


_HANDED = contextvars.ContextVar[list[str] | None]("handed", default=None)  # the stack that submitted this job


class _FirstCall(Exception):
    """Raised inside the scripted LM's first call: the walk is over."""


def layer(relative: str) -> int:
    """The layer of a file of the repository (the application highest)."""
    if relative.startswith(_APPLICATION):
        return len(_LAYERS) - 1
    return next(i for i, prefixes in enumerate(_LAYERS) if relative.startswith(prefixes))


def _relative(frame: FrameType) -> str | None:
    return _relative_path(frame.f_code.co_filename)


@functools.cache  # the profile hook asks on every call: resolve each file name once
def _relative_path(filename: str) -> str | None:
    """A teammed source file's path from the repository's root; None for any other file."""
    path = Path(filename)
    if not path.is_absolute() or _ROOT not in path.parents or ".venv" in path.parts:
        return None
    relative = path.relative_to(_ROOT).as_posix()
    return relative if not relative.startswith(("tests/", "scripts/", "benchmarks/")) else None


def _questions(path: Path, n: int = 80) -> Path:
    """``n`` four-option questions of MedQA's length, as a data file."""
    stem = "A 54-year-old man presents with three days of fever, productive cough and pleuritic chest pain. " * 7
    rows = [{"id": f"q{i}", "question": f"{stem}Which is the most likely diagnosis? ({i})",
             "options": {"A": "Pneumonia", "B": "Pulmonary embolism", "C": "Pericarditis", "D": "Pneumothorax"},
             "answer_idx": "ABCD"[i % 4]} for i in range(n)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def walk(argv: list[str]) -> dict[str, Any]:
    """The stack and the walk of one CLI command (``argv`` after ``teammed``)."""
    from teammed.cli import main

    entered: list[str] = []
    climbs: list[tuple[str, str]] = []
    stack: list[str] = []
    parents: dict[threading.Thread, list[str]] = {}  # a worker thread: the files of the stack that started it

    tokens: dict[FrameType, contextvars.Token[list[str] | None]] = {}

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "return" and frame in tokens:
            _HANDED.reset(tokens.pop(frame))  # the submitter's own context as it was
        if event != "call" or (callee := _relative(frame)) is None:
            return
        if callee == "src/teammed/backends/scripted.py" and frame.f_code.co_name == "complete":
            if not stack:
                stack.extend(_joined(_above(), _stack_of(frame)))
            raise _FirstCall  # this call and every later one: the command fails at once
        if stack:
            return
        if callee == "src/teammed/interrupts.py" and frame.f_code.co_name == "submit":
            # the job runs in a copy of the submitter's context, taken inside this call
            tokens[frame] = _HANDED.set(_joined(_above(), _stack_of(frame, first=True)))
        if frame.f_code.co_name == "<module>" or frame.f_code.co_flags & inspect.CO_NEWLOCALS == 0:
            return  # a module or class body run by an import
        if callee not in entered:
            entered.append(callee)
        caller = frame.f_back
        while caller is not None and _relative(caller) is None:
            caller = caller.f_back
        if caller is not None and layer(callee) > layer(source := _relative(caller) or ""):
            climbs.append((source, callee))

    def _above() -> list[str]:
        return _HANDED.get() or parents.get(threading.current_thread(), [])  # noqa: B023

    start = threading.Thread.start

    def started(thread: threading.Thread) -> None:  # the new thread's stack continues its starter's
        parents[thread] = _joined(_above(), _stack_of(sys._getframe(), first=True))
        start(thread)

    threading.Thread.start = started  # type: ignore[method-assign,assignment]
    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        main(argv)
    except _FirstCall:
        pass
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
        threading.Thread.start = start  # type: ignore[method-assign,assignment]
    if not stack:
        raise SystemExit(f"teammed {' '.join(argv)} ended without asking the scripted model")
    ups = sum(layer(b) > layer(a) for a, b in zip(stack, stack[1:], strict=False))
    return {"stack": stack, "stack_climbs": ups, "walk": entered, "walk_climbs": climbs}


def _joined(parent: list[str], own: list[str]) -> list[str]:
    return parent + own[1:] if parent and own and parent[-1] == own[0] else parent + own


def _stack_of(frame: FrameType, first: bool = False) -> list[str]:
    files: list[str] = []
    current: FrameType | None = frame if first else frame.f_back
    while current is not None:
        if (relative := _relative(current)) is not None and (not files or files[-1] != relative):
            files.append(relative)
        current = current.f_back
    return files[::-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("commands", nargs="+", choices=sorted(_COMMANDS))
    parser.add_argument("--files", action="store_true", help="list the files, not only their counts")
    parser.add_argument("--json", action="store_true", help="print one JSON object of every command's walk")
    args = parser.parse_args()
    walks = {}
    for command in args.commands:
        with tempfile.TemporaryDirectory() as tmp:
            data = _questions(Path(tmp) / "questions.jsonl")
            argv = [part.format(tmp=tmp, data=data) for part in _COMMANDS[command]] + ["--model", "scripted"]
            found = walks[command] = walk(argv)
        if args.json:
            continue
        print(f"{command}: stack {len(set(found['stack']))} files ({len(found['stack'])} steps, "
              f"{found['stack_climbs']} up a layer); walk {len(found['walk'])} files, "
              f"{len(found['walk_climbs'])} calls up a layer "
              f"({len(set(found['walk_climbs']))} distinct)")
        if args.files:
            print("  stack: " + " > ".join(found["stack"]))
            print("  walk:  " + ", ".join(found["walk"]))
            for source, callee in sorted(set(found["walk_climbs"])):
                print(f"  up:    {source} -> {callee}")
    if args.json:
        print(json.dumps(walks))


if __name__ == "__main__":
    main()
