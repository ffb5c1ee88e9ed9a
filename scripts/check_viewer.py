"""Render the report viewer in headless Chromium and take screenshots a person can look at.

Builds a small report from real runs of the pipeline on a scripted backend that answers
with varied, clinical-sounding text (roles with long names, unrounded confidences, one
question that fails), then renders ``transcripts.html`` with Debian's ``chromium`` and checks
that the page's script ran (filters, search, anchors) by reading the DOM back.

    apt-get install -y chromium
    python scripts/check_viewer.py --out /tmp/viewer      # screenshots + report under /tmp/viewer

Exit code 0 when every check passes; each failed check prints one line.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

ROLES = [
    "Infectious Disease Specialist", "Clinical Pharmacologist with a focus on antimicrobial toxicity",
    "Hematologist", "Emergency Medicine Physician", "Neurologist specializing in peripheral neuropathy",
    "Pediatric Cardiologist", "General Internist", "Obstetrician-Gynecologist", "Critical Care Intensivist",
]
SENTENCES = [
    "The timeline after starting isoniazid points to pyridoxine deficiency.",
    "Heavy menstrual losses and a vegetarian diet make iron deficiency the leading cause.",
    "Fever, neck stiffness and hypotension in a dormitory suggest meningococcal disease.",
    "I agree with the leader's summary but would weigh the laboratory findings more.",
    "The distractor relies on a rare association; the common cause fits every finding.",
]


def _rng(call: Any) -> random.Random:
    key = repr((call.signature, sorted((k, str(v)) for k, v in call.inputs.items())))
    return random.Random(int(hashlib.sha256(key.encode()).hexdigest()[:12], 16))


def _value(name: str, schema: dict[str, Any], rng: random.Random) -> Any:
    if "enum" in schema:
        return rng.choice(schema["enum"])
    kind = schema.get("type")
    if kind == "array":
        item = schema.get("items", {})
        if "enum" in item:
            letters = list(item["enum"])
            rng.shuffle(letters)
            return letters
        return [_value(name, item, rng) for _ in range(max(1, schema.get("minItems", 1)))]
    if kind == "object":
        return {k: _value(k, v, rng) for k, v in schema.get("properties", {}).items()}
    if kind == "string":
        if "role" in name or "specialt" in name:
            return rng.choice(ROLES)
        if "expertise" in name:
            return "Diagnosis and management of " + rng.choice(["neuropathy", "anaemia", "sepsis", "drug toxicity"])
        return " ".join(rng.sample(SENTENCES, 2))
    if kind == "number":
        low, high = schema.get("minimum", 0.0), schema.get("maximum", 1.0)
        return low + (high - low) * rng.random()  # unrounded on purpose: the viewer must round
    if kind == "integer":
        return int(schema.get("minimum", 1))
    if kind == "boolean":
        return rng.random() < 0.5
    return None


def clinical_responder(fail_marker: str):  # type: ignore[no-untyped-def]
    def respond(call: Any) -> Any:
        if fail_marker and fail_marker in str(call.inputs.get("question", "")):
            raise RuntimeError("simulated backend failure: the server closed the connection")
        rng = _rng(call)
        answer = {k: _value(k, v, rng) for k, v in call.schema.get("properties", {}).items()}
        for key in ("n_agents", "count", "team_size"):
            if key in answer:
                answer[key] = 3
        return answer

    return respond


def build_runs(root: Path) -> list[Path]:
    from teammed.backends.resolve import Deployment
    from teammed.backends.scripted import ScriptedLM
    from teammed.config import preset
    from teammed.data import load_dataset, sample_questions
    from teammed.programs.peers import build_system
    from teammed.programs.teamwork import TeamworkProgram
    from teammed.records import RunIdentity, dataset_digest
    from teammed.runner import RunSettings, run_questions

    source = load_dataset("demo")
    questions = sample_questions(source, n=6, seed=111)

    def settings(out: Path, system: str, label: str, config: dict | None) -> RunSettings:
        identity = RunIdentity(system=system, label=label, config=config, model="scripted", deployments=["scripted"],
                               dataset="demo", dataset_sha256=dataset_digest(source), split="all", n=6, seed=111,
                               question_ids=[q.id for q in questions])
        return RunSettings(out_dir=out, identity=identity)

    fail_marker = questions[2].question[:40]
    lm = ScriptedLM(clinical_responder(fail_marker))
    deployments = [Deployment("scripted", lm, 2)]
    dirs = []
    for label in ("base", "all"):
        config = preset(label, n_agents=3)
        out = root / label / "seed111"
        run_questions(questions, program_factory=lambda c=config: TeamworkProgram(c), deployments=deployments,
                      settings=settings(out, "teamwork", label, config.model_dump(mode="json")))
        dirs.append(out)
    out = root / "cot" / "seed111"
    run_questions(questions, program_factory=lambda: build_system("cot"), deployments=deployments,
                  settings=settings(out, "cot", "cot", None))
    dirs.append(out)
    return dirs


def chromium() -> str:
    path = next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)
    if path:
        return path
    raise SystemExit("check_viewer: no chromium on PATH; install it with `apt-get install -y chromium`")


def _chromium(url: str, *flags: str) -> str:
    """What headless Chromium prints for ``url`` with ``flags``, on a fresh profile."""
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                               "--no-first-run", "--disable-background-networking", "--disable-component-update",
                               "--disable-sync", f"--user-data-dir={profile}", "--hide-scrollbars", *flags,
                               "--virtual-time-budget=3000", url],
                              check=True, capture_output=True, text=True, timeout=120).stdout


def screenshot(url: str, path: Path, *, size: str = "1400,1000") -> None:
    """A screenshot of ``url`` as first shown, unscrolled. Headless Chromium's ``--screenshot`` paints a
    page scrolled by its script (an ``#anchor``) blank above the sticky bar: a plain page of 400
    paragraphs and ``window.scrollTo(0, 3000)`` comes out all blank. Where a linked question lands
    is checked from the DOM instead (`checks`)."""
    _chromium(url, f"--screenshot={path}", f"--window-size={size}")


def dom(url: str) -> str:
    return _chromium(url, "--dump-dom")


def checks(page: Path) -> list[str]:
    """What a person relies on, read back from the rendered DOM; returns the failures."""
    problems = []
    url = page.resolve().as_uri()
    html_text = page.read_text(encoding="utf-8")
    if re.search(r"\d\.\d{5,}", re.sub(r"<script>.*?</script>", "", html_text, flags=re.S)):
        problems.append("an unrounded number is shown: " + re.search(r"\d\.\d{5,}", html_text).group(0))
    if re.search(r"""(src|href)=["']https?://""", html_text):
        problems.append("the page loads something from the network")
    rendered = dom(url)
    total = html_text.count('<article class="q"')
    ready = re.search(r'data-ready="showing (\d+) of (\d+) questions"', rendered)
    if not ready or int(ready.group(1)) != total:
        problems.append(f"the script did not run or miscounted (expected {total} shown): {ready and ready.group(0)}")
    failed = dom(url + "?status=failed")
    shown = len(re.findall(r'<article class="q" [^>]*data-status="failed"', failed))
    hidden_other = len(re.findall(r'<article class="q hidden"', failed))
    if not shown or shown + hidden_other != total:
        problems.append(f"status=failed filter: {shown} failed shown, {hidden_other} hidden of {total}")
    for malformed in ('?status=%22%5D', '?status=x%22%5D%2C*%5B&run=%22', '#%E0%A4%A'):  # "] and a torn escape
        if 'data-ready="showing' not in dom(url + malformed):
            problems.append(f"the script threw on the malformed URL ...{malformed}")
    # a linked question lands just below the sticky bar, never under it (expanded or not)
    ids = re.findall(r'<article class="q" id="([^"]+)"', html_text)
    queries = ["", "?expand=1"]
    runs = sorted({int(m) for m in re.findall(r'data-run="(\d+)"', html_text)})
    if len(runs) > 1 and ids:  # a filter showing another run: the linked question is shown all the same
        mine = int(re.match(r"r(\d+)-", ids[len(ids) // 2]).group(1))  # type: ignore[union-attr]
        queries.append(f"?run={next(r for r in runs if r != mine)}")
    for query in queries:
        for anchor in ids[len(ids) // 2:len(ids) // 2 + 1]:
            landed = re.search(r'data-anchor="(-?\d+) (-?\d+) (end|mid)"', dom(f"{url}{query}#{anchor}"))
            if not landed:
                problems.append(f"#{anchor}{query}: the linked question was not opened")
                continue
            top, bar, where = int(landed.group(1)), int(landed.group(2)), landed.group(3)
            if top < bar or (where == "mid" and top > bar + 48) or top == 0:
                problems.append(f"{query}#{anchor}: the question's top is at {top}px, the sticky bar ends at {bar}px")
    searched = dom(url + "?q=meningococcal")
    if 'data-ready="showing 0 of' in searched or f'data-ready="showing {total} of' in searched:
        problems.append("search for 'meningococcal' did not narrow the list")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(tempfile.mkdtemp(prefix="teammed-viewer-")),
                        help="where the runs, the report and the screenshots go")
    args = parser.parse_args()
    import logging

    logging.basicConfig(level=logging.ERROR)
    from teammed.evals import build_report

    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    runs = build_runs(out / "runs")
    report = build_report(runs, out / "report", baseline="base").parent
    page = report / "transcripts.html"
    # a filtered, searched view with the matching question open (no scrolling: what a person sees first)
    screenshot(page.resolve().as_uri() + "?status=wrong&run=1&q=hypertension&expand=1", out / "viewer.png")
    screenshot(page.resolve().as_uri() + "?status=failed", out / "viewer-failed.png", size="1400,700")
    screenshot(page.resolve().as_uri(), out / "viewer-overview.png", size="1400,900")
    problems = checks(page)
    for problem in problems:
        print(f"check_viewer: {problem}")
    print(f"report: {report}\nscreenshots: {out / 'viewer.png'}, {out / 'viewer-failed.png'}, "
          f"{out / 'viewer-overview.png'}\nplots: {', '.join(str(p) for p in sorted(report.glob('*.png')))}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
