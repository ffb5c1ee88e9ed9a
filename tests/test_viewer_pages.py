"""The transcript viewer stays usable on long runs: beyond PAGE_QUESTIONS ids it is split into pages."""

from __future__ import annotations

import json
import re

from teammed.cli import main
from teammed.evals._html import page_name

from .helpers import transcripts_pages


def _run(tmp_path, n: int):
    out = tmp_path / "run"
    assert main(["run", "--dataset", "demo", "--n", str(n), "--model", "scripted", "--no-cache", "--out",
                 str(out)]) == 0
    return out, [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def _ids(page: str) -> list[str]:
    return re.findall(r'<span class="badge [^"]*">[^<]*</span> <b>([^<]+)</b>', page)


def test_pages_split_the_questions_in_id_order_and_link_each_other(tmp_path):
    _, rows = _run(tmp_path, 12)
    pages = transcripts_pages([("run a", rows), ("run b", rows)], page_size=5)
    assert len(pages) == 3
    seen: list[str] = []
    for k, page in enumerate(pages, start=1):
        ids = list(dict.fromkeys(_ids(page)))
        assert 0 < len(ids) <= 5 and not set(ids) & set(seen)  # each question on one page only
        seen += ids
        assert f"page {k} of 3" in page
        for other in range(1, 4):
            assert (f'href="{page_name(other)}"' in page) == (other != k)
        assert " of 12 correct" in page  # each run's header counts the whole run
    assert sorted(seen) == sorted({r["id"] for r in rows})


def test_a_short_run_is_one_page_without_a_pager(tmp_path):
    _, rows = _run(tmp_path, 3)
    (page,) = transcripts_pages([("run", rows)], page_size=5)
    assert "page 1 of" not in page and len(set(_ids(page))) == 3


def test_report_writes_every_page_and_removes_stale_ones(tmp_path, monkeypatch):
    import teammed.evals.report as report

    out, _ = _run(tmp_path, 12)
    monkeypatch.setattr(report, "PAGE_QUESTIONS", 5)
    assert main(["report", str(out), "--out", str(tmp_path / "report")]) == 0
    names = sorted(p.name for p in (tmp_path / "report").glob("transcripts*.html"))
    assert names == ["transcripts-2.html", "transcripts-3.html", "transcripts.html"]
    assert "3 pages" in (tmp_path / "report" / "report.md").read_text()
    monkeypatch.setattr(report, "PAGE_QUESTIONS", 1000)
    assert main(["report", str(out), "--out", str(tmp_path / "report")]) == 0
    assert sorted(p.name for p in (tmp_path / "report").glob("transcripts*.html")) == ["transcripts.html"]
