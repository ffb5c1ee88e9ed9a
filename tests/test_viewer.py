"""The transcripts viewer and the report's figures, as a person reads them."""

from __future__ import annotations

import importlib.util
import re
import shutil
import warnings
from pathlib import Path

import pytest

from teammed.deliberation import Deliberation
from teammed.evals._html import anchor_id, fmt
from teammed.evals._plots import roles_heatmap

from .helpers import transcripts_html

ROOT = Path(__file__).resolve().parent.parent


def _row(qid: str, *, correct: bool = False, failed: bool = False, system: str = "teamwork") -> dict:
    return {
        "id": qid, "system": system, "question": f"A 52-year-old man with hypertension ({qid})? <b>x</b>",
        "context": "Labs: K 3.2", "options": {"A": "Furosemide", "B": "Hydrochlorothiazide"},
        "gold": "B", "prediction": None if failed else ("B" if correct else "A"), "correct": correct,
        "failed": failed, "error": "RuntimeError: boom" if failed else None, "confidence": 0.7729999999999999,
        "calls": 9, "prompt_tokens": 100, "completion_tokens": 20, "latency_s": 1.23456789,
        "trust": {"agent_1": 0.6019999999999999},
        "record": Deliberation.model_validate({
            "answer": "B", "agents": [{"id": "agent_1", "role": "Nephrologist", "expertise": "electrolytes",
                                       "weight": 0.3333333333}],
            "r2": [], "final": [], "votes_by_turn": {}, "challenges": [], "closed_loop": [], "mediations": [],
            "report": "", "smm": {}, "trust": None, "aggregation": "trust_borda", "tie": None, "early_consensus": False,
            "scores": {"A": 2.2600000000000002, "B": 5.1219999999},
            "trust_history": [{"stage": "initial", "scores": {"agent_1": 0.8}}],
        }).model_dump(mode="json"),
        "transcript": [{"phase": "R2", "agent": "agent_1", "kind": "assessment", "text": "thiazide",
                        "data": {"confidence": 0.66666666667}}],
    }


def _page() -> str:
    rows = [_row("q1", correct=True), _row("q2"), _row("q10", failed=True)]
    return transcripts_html([("base · demo · seed 111", rows), ("cot · demo · seed 111",
                                                                [_row("q1", system="cot")])])


def test_numbers_are_rounded_for_reading():
    assert fmt(0.7729999999999999) == "0.773"
    assert fmt(2.0) == "2" and fmt(-0.0001) == "0" and fmt(None) == "" and fmt(True) == "yes" and fmt(7) == "7"
    page = _page()
    visible = re.sub(r"<script>.*?</script>|<style>.*?</style>", "", page, flags=re.S)
    assert not re.search(r"\d\.\d{4,}", visible), re.search(r"\d\.\d{4,}", visible)
    assert "5.122" in page and "0.667" in page and "0.602" in page
    assert "0.773" not in page  # a row's confidence is High, Medium or Low: another tool's number reads as none


def test_stem_options_status_and_anchor_per_question():
    page = _page()
    assert "A 52-year-old man with hypertension (q2)? &lt;b&gt;x&lt;/b&gt;" in page  # the stem, escaped
    assert "Hydrochlorothiazide" in page and "Labs: K 3.2" in page
    statuses = re.findall(r'<article class="q" id="([^"]+)" data-status="(\w+)" data-run="(\d)" data-system="(\w+)"',
                          page)
    assert [(s, r, sy) for _, s, r, sy in statuses] == [
        ("correct", "0", "teamwork"), ("wrong", "0", "teamwork"), ("failed", "0", "teamwork"),
        ("wrong", "1", "cot")]
    ids = [i for i, *_ in statuses]
    assert len(set(ids)) == len(ids) and ids[:3] == ["r0-q1", "r0-q2", "r0-q10"]  # natural order: q2 before q10
    for anchor in ids:
        assert f'href="#{anchor}"' in page
    assert anchor_id(3, "medqa/17 a") == "r3-medqa-17-a"
    assert "RuntimeError: boom" in page


def test_self_contained_with_filters_and_search():
    page = _page()
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)  # nothing from the network
    for control in ('name="status" value="correct"', 'value="wrong"', 'value="failed"', 'id="search"',
                    '<option value="cot">system: cot</option>', '<option value="1">cot · demo · seed 111</option>'):
        assert control in page


def test_roles_heatmap_keeps_long_labels(tmp_path):
    long_roles = {f"Clinical Pharmacologist with a focus on antimicrobial toxicity {i}": 10 - i for i in range(8)}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "constrained_layout not applied" was the cut-off labels
        path = roles_heatmap({"medqa": long_roles, "pubmedqa": {"Nephrologist": 3}}, tmp_path / "roles.png")
    assert path is not None and path.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Debian's chromium (apt-get install chromium)")
def test_viewer_works_in_headless_chromium(tmp_path):
    spec = importlib.util.spec_from_file_location("check_viewer", ROOT / "scripts" / "check_viewer.py")
    assert spec and spec.loader
    check_viewer = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check_viewer)
    page = tmp_path / "transcripts.html"
    rows = [_row("q1", correct=True), _row("q2"), _row("q3", failed=True)]
    rows[1]["question"] = "Fever and neck stiffness: meningococcal disease?"
    page.write_text(transcripts_html([("base", rows)]), encoding="utf-8")
    assert check_viewer.checks(page) == []


def test_check_viewer_builds_its_runs_with_todays_runner(tmp_path):
    """scripts/check_viewer.py drives the runner directly; it must keep up with the runner's API."""
    spec = importlib.util.spec_from_file_location("check_viewer", ROOT / "scripts" / "check_viewer.py")
    assert spec and spec.loader
    check_viewer = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check_viewer)
    dirs = check_viewer.build_runs(tmp_path / "runs")
    assert len(dirs) == 3 and all((d / "results.jsonl").is_file() for d in dirs)


def test_the_viewer_fits_a_phone_width():
    """At 390 px tables scroll inside themselves and a question's summary wraps (checked by eye in headless
    Chromium; here the rules that do it)."""
    from teammed.evals._html import _CSS

    phone = _CSS.split("@media (max-width:640px){", 1)[1]
    assert "table{display:block;overflow-x:auto" in phone and "summary{flex-wrap:wrap" in phone
    assert "min-width:0" in phone  # the search box no longer forces 24em
