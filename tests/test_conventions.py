"""The conventions of a well-behaved tool: where the cache lives, a licence and a citation."""

from __future__ import annotations

import tomllib
from pathlib import Path

import yaml

from teammed.backends.cache import default_cache_dir

REPO = Path(__file__).resolve().parent.parent


def test_the_cache_follows_teammed_cache_dir_then_xdg_cache_home(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("TEAMMED_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "teammed" / "responses"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "teammed" / "responses"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/path")  # the XDG spec: a relative path is ignored
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "teammed" / "responses"
    monkeypatch.setenv("TEAMMED_CACHE_DIR", str(tmp_path / "mine"))
    assert default_cache_dir() == tmp_path / "mine"


def test_the_licence_file_is_the_one_the_package_declares():
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["license"]["text"]
    assert declared == "Apache-2.0"
    assert "Apache License" in (REPO / "LICENSE").read_text() and "Version 2.0" in (REPO / "LICENSE").read_text()


def test_citation_cff_is_valid_and_cites_the_paper():
    citation = yaml.safe_load((REPO / "CITATION.cff").read_text())
    assert citation["cff-version"] == "1.2.0" and citation["license"] == "Apache-2.0"
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert citation["version"] == version
    assert any("TeamMedAgents" in ref["title"] for ref in citation["references"])


def test_outputs_are_readable_by_colleagues(tmp_path):
    """run.json, summary.json, results, the report and a saved program: 0644 under umask 022."""
    import os
    import stat

    from teammed.cli import main

    old = os.umask(0o022)
    try:
        run = tmp_path / "run"
        assert main(["run", "--dataset", "demo", "--n", "2", "--model", "scripted", "--no-cache",
                     "--out", str(run)]) == 0
        assert main(["report", str(run), "--out", str(tmp_path / "report")]) == 0
        from teammed.programs import TeamworkProgram, preset
        from teammed.programs.persist import save_program

        save_program(TeamworkProgram(preset("base")), tmp_path / "program.json")
    finally:
        os.umask(old)
    files = [p for p in [*run.iterdir(), *(tmp_path / "report").iterdir(), tmp_path / "program.json"]
             if p.is_file() and p.name != ".lock"]
    assert {"run.json", "summary.json", "results.jsonl", "program.json"} <= {p.name for p in files}
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o644, path
