"""The ``tune`` and ``reproduce`` parsers (their commands: `teammed.cli.cmd_tune`, `cmd_reproduce`)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from teammed.cli_args import non_negative_int, positive_int, probability, seed_list
from teammed.errors import ConfigError

__all__ = ["add_parsers", "budget_text"]

_OPTIMIZERS = ["none", "labeled", "bootstrap", "random-search", "mipro", "gepa"]


def budget_text(raw: str) -> str:
    """``--budget``/``--tune-budget``, checked when parsed so nothing is created for a bad one."""
    from teammed.experiments.specs import check_budget

    try:
        return check_budget(raw)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


ROWS = ("Zero-Shot", "Few-Shot", "CoT", "Leadership", "Mut. Monitor.", "Shared Model", "Team Orient.", "Mut. Trust",
        "All Compon.", "Closed Loop", "MDAgents", "TeamMed (tuned)")


def add_parsers(sub: Any, *, model_flags: Callable[[argparse.ArgumentParser], None],
                data_flags: Callable[[argparse.ArgumentParser, str | None], None],
                commands: tuple[Callable[[argparse.Namespace], int], Callable[[argparse.Namespace], int]]) -> None:
    """Register ``tune`` and ``reproduce`` on the CLI's subparsers."""
    t = sub.add_parser("tune", help="design prompts and components together; prove the result on held-out questions")
    data_flags(t, None)
    t.add_argument("--tune-split", help="tune on this split of the source (e.g. train); default: the 'tune' part "
                   "of teammed.data.splits")
    t.add_argument("--budget", required=True, type=budget_text,
                   help="calls=N, tokens=N or usd=X (comma-separated for several)")
    t.add_argument("--optimizer", choices=_OPTIMIZERS, help="DSPy optimizer of stages 1 and 3 (default: bootstrap)")
    t.add_argument("--storage", help="sqlite:///file.db (default: in --out), a .log journal file, or postgresql://...")
    t.add_argument("--study", help="study name (default: tune-<dataset name>-<content hash>)")
    t.add_argument("--n-tune", type=positive_int, help="tuning questions (default: all of the tune part)")
    t.add_argument("--n-eval", type=positive_int, default=100, help="held-out questions for the proof (default: 100)")
    t.add_argument("--seed", type=non_negative_int, help="sampling and racing-order seed (default: 111)")
    t.add_argument("--batch-size", type=positive_int, help="questions per racing round (default: 10)")
    t.add_argument("--stage1-batches", type=positive_int,
                   help="racing rounds' worth of questions for influence (default: 3)")
    t.add_argument("--pool-size", type=positive_int, help="configurations raced in stage 2 (default: 8)")
    t.add_argument("--alpha", type=probability,
                   help="racing's error rate: the chance of dropping a configuration as good as the best, per "
                   "race, under every look (default: 0.05)")
    t.add_argument("--out", type=Path, help="output directory "
                   "(default: special_sets/<dataset name>-<content hash>_tune)")
    t.add_argument("--json", action="store_true", help="print the result as one JSON document on stdout "
                   "(everything else on stderr)")
    model_flags(t)
    t.set_defaults(func=commands[0])

    r = sub.add_parser("reproduce", help="a paper's table, measured, with the published numbers beside")
    r.add_argument("protocol",
                   help="001-table1 (TeamMedAgents, Table 1) or medagentsbench (MedAgentsBench's hard sets: published "
                   "rows from --published, measured rows ours, on the same questions)")
    r.add_argument("--data-dir", type=Path, help="where local copies of the paper's benchmarks live")
    r.add_argument("--datasets", help="comma-separated codes (MQA,PQA,MML,MMC,MBL,DDX,PVQ,PMC) or files; "
                   "default: all eight (medagentsbench: data set names, default medqa)")
    r.add_argument("--split", help="the split every data set is read from (default: each one's default; test in a "
                   "MedAgentsBench folder, e.g. --split test_hard); cells sample its held-out part")
    r.add_argument("--rows", help="semicolon-separated rows (default: all rows: " + "; ".join(ROWS) + "; and, asked "
                   "for by name, TeamMed (adaptive))")
    r.add_argument("--seeds", default=[111, 222, 333], type=seed_list,
                   help="comma-separated sampling seeds (default and paper: 111,222,333)")
    r.add_argument("--n", type=positive_int, help="questions per cell (default: 50 for 001-table1, the whole split "
                   "for medagentsbench)")
    r.add_argument("--published", type=Path, help="medagentsbench: MedAgentsBench's output/ folder (required)")
    r.add_argument("--published-model", help="medagentsbench: whose published outputs (default: --model's name "
                   "without its provider, e.g. gpt-4o)")
    r.add_argument("--pool-split", help="medagentsbench: the split Few-Shot and MDAgents draw worked examples from, "
                   "the table's questions left out (default: test)")
    r.add_argument("--storage", help="where the grid's cells live; the same URL on several machines shares them")
    r.add_argument("--study", help="study name (default: reproduce-<protocol>)")
    r.add_argument("--tune-budget", default="calls=20000", type=budget_text,
                   help="budget of the special set's tune per data set (default: calls=20000)")
    r.add_argument("--optimizer", default="none", choices=_OPTIMIZERS,
                   help="the special set's prompt optimizer (default: none)")
    r.add_argument("--batch-size", type=positive_int, default=10,
                   help="questions per racing round of the special set's tune (default: 10)")
    r.add_argument("--out", type=Path, help="output directory (default: reproduce/<protocol>)")
    r.add_argument("--json", action="store_true", help="print the table as one JSON document on stdout "
                   "(the Markdown table and everything else on stderr)")
    model_flags(r)
    r.set_defaults(func=commands[1])
