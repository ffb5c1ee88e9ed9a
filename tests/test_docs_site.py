"""Issue 36, item 3: the site's pages read as prose first; each claim's evidence is one click away."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _hooks():
    spec = importlib.util.spec_from_file_location("mkdocs_hooks", ROOT / "scripts" / "mkdocs_hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_evidence_line_of_every_page_folds_into_a_collapsed_block() -> None:
    fold = _hooks().evidence_blocks
    text = "A claim.\n<small>Shown by: `tests/test_x.py::test_y`, and `z`.</small>\n\nNext."
    folded = fold(text)
    assert '<details class="evidence" markdown="1"><summary>Evidence</summary>' in folded
    assert "Shown by: `tests/test_x.py::test_y`, and `z`." in folded and "<small>" not in folded
    for page in sorted((ROOT / "docs").rglob("*.md")):
        source = page.read_text()
        assert fold(source).count('class="evidence"') == source.count("<small>Shown by") + source.count(
            "<small>Measured by") + source.count("<small>Not tested"), page
        assert "<small>Shown by" not in fold(source), page
