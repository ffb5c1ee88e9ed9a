"""How much of a deliberation's prompt a server's prefix cache can reuse (issue 18, item 4; not a test).

Runs ``teammed run`` (presets ``all`` and ``base``, N=3, T=2, ``--no-cache``) on 10 real-length
MedQA-style questions (stems of at least 750 characters, options of at least 250 in all; written
here, see `VIGNETTES`) against `benchmarks/fake_server.py --prefix-cache`, which counts tokens with
tiktoken cl100k_base and emulates vLLM's automatic prefix caching in 16-token blocks. Per preset:

  prompt tokens / question                 the server's count
  requests / question
  requests without their question stem     the request's text contains no stem of the 10 in full
  share of prompt tokens cached            leading 16-token blocks the server had seen before
  rows' cached_prompt_tokens = server's    the run's accounting against the server's report

    python benchmarks/prefix_cache.py [--tree PATH] [--work DIR] [--presets all,base] [--transport litellm]

``--tree`` runs another source tree (e.g. ``git worktree add /tmp/before <commit>``) through the
same launcher and the same fake server as `benchmarks/run.py` does, so one script measures the
prompt layout before and after. A tree older than the cached-token accounting records no
``cached_prompt_tokens``: the last figure then reads "not recorded".
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run import HERE, REPO, Tree  # noqa: E402

N_QUESTIONS = 10
MIN_STEM, MIN_OPTIONS = 750, 250

# Ten MedQA-style vignettes of real length, written for this benchmark (not taken from a data set).
VIGNETTES: list[dict[str, Any]] = [json.loads(line) for line in
                                   (HERE / "vignettes.jsonl").read_text(encoding="utf-8").splitlines()]


def write_questions(path: Path) -> Path:
    """The 10 vignettes as MedQA-format rows (``id``, ``question``, ``options``, ``answer_idx``,
    ``answer``); checks that each is of real length."""
    with path.open("w") as sink:
        for i, vignette in enumerate(VIGNETTES):
            stem, options = vignette["question"], vignette["options"]
            assert len(stem) >= MIN_STEM, (i, len(stem))
            assert sum(len(text) for text in options.values()) >= MIN_OPTIONS, (i, options)
            row = {"id": f"pc-{i:02d}", **vignette, "answer": options[vignette["answer_idx"]], "meta_info": "step2&3"}
            sink.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path


def measure(tree: Tree, preset: str, questions: Path, *, extra: list[str]) -> dict[str, Any]:
    """One `teammed run` of ``preset`` on a fresh server (an empty prefix cache, each request's text logged);
    the figures."""
    _, requests, rows = tree.run(preset=preset, questions=questions, n=N_QUESTIONS, latency_s=0, concurrency=4,
                                 tag=preset, server_flags=["--prefix-cache", "--log-prompts"], extra=extra)
    stems = [v["question"] for v in VIGNETTES]
    prompt = sum(r["prompt_tokens"] for r in requests)
    cached = sum(r.get("cached_tokens", 0) for r in requests)
    recorded = [r["cached_prompt_tokens"] for r in rows if "cached_prompt_tokens" in r]
    return {
        "prompt tokens / question": prompt / len(rows),
        "requests / question": len(requests) / len(rows),
        "requests": len(requests),
        "requests without their question stem": sum(not any(s in r.get("prompt", "") for s in stems)
                                                    for r in requests),
        "share of prompt tokens cached": cached / prompt if prompt else 0.0,
        "server's cached tokens": cached,
        "rows' cached_prompt_tokens": sum(recorded) if len(recorded) == len(rows) else None,
        "rows' cached_prompt_tokens = server's": (sum(recorded) == cached) if len(recorded) == len(rows)
                                                  else "not recorded",
        "rows' prompt tokens = server's": sum(r.get("prompt_tokens", 0) for r in rows) == prompt,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", type=Path, default=REPO, help="the teammed source tree to run (default: this "
                                                                "checkout)")
    parser.add_argument("--work", type=Path, help="where runs and server logs go (default: a temporary directory)")
    parser.add_argument("--presets", default="all,base", help="comma-separated presets (default all,base)")
    parser.add_argument("--transport", choices=["auto", "litellm"], help="pass --transport to teammed run")
    args = parser.parse_args(argv)
    tree = args.tree.resolve()
    if not (tree / "src" / "teammed" / "cli.py").is_file():
        raise SystemExit(f"{tree} is not a teammed source tree")
    work = args.work or Path(tempfile.mkdtemp(prefix="teammed-prefix-cache-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"tree {tree}; runs and server logs: {work}", file=sys.stderr, flush=True)
    questions = write_questions(work / "questions.jsonl")
    runner = Tree("prefix-cache", tree, work)
    extra = ["--transport", args.transport] if args.transport else []
    figures = {}
    for preset in (p.strip() for p in args.presets.split(",") if p.strip()):
        figures[preset] = measure(runner, preset, questions, extra=extra)
        print(f"  {preset}: done", file=sys.stderr, flush=True)
    names = list(next(iter(figures.values())))
    width = max(map(len, names))
    print(f"{'figure (N=3, T=2, 10 questions)':<{width}}  " + "  ".join(f"{p:>12}" for p in figures))
    for name in names:
        cells = []
        for preset in figures:
            value = figures[preset][name]
            cells.append(f"{value:>12.1%}" if name.startswith("share") else
                         f"{value:>12.1f}" if isinstance(value, float) else f"{value!s:>12}")
        print(f"{name:<{width}}  " + "  ".join(cells))
    (work / "figures.json").write_text(json.dumps({"tree": str(tree), "figures": figures}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
