"""Backend flags shared by every command (they become a `teammed.experiments.BackendSpec`, whose options
reach the main model(s), a ``--deployments`` file and ``--teacher-model`` / ``--reflection-model``)."""

from __future__ import annotations

import argparse
from pathlib import Path

# teammed.schema.DIALECTS, spelled out so `--help` does not import DSPy (a test keeps them equal)
DIALECTS = ("json_schema_strict", "json_schema", "json_object_schema", "json_object", "none")

__all__ = ["add_model_flags"]


def add_model_flags(p: argparse.ArgumentParser) -> None:
    from teammed.cli_args import api_base, model_spec, non_negative_float, positive_float, positive_int

    g = p.add_argument_group("backend")
    g.add_argument("--model", action="append", type=model_spec,
                   help="litellm model string, `local` (default), local:PATH.gguf or scripted (a dry run); "
                   "repeat for several deployments (questions are assigned round-robin)")
    g.add_argument("--api-base", type=api_base,
                   help="base URL of an OpenAI-compatible server (with --model openai/<alias>)")
    g.add_argument("--deployments", type=Path, help="a litellm Router model_list file (YAML/JSON): model_name, "
                   "litellm_params {model, api_base, api_key_env, rpm, tpm, max_parallel_requests, "
                   "structured_output}; replaces --model")
    g.add_argument("--concurrency", type=positive_int, default=4,
                   help="questions in flight (default 4); requests are bounded by --max-parallel-requests")
    g.add_argument("--max-parallel-requests", "--parallel-requests", dest="max_parallel_requests", type=positive_int,
                   help="requests in flight per deployment, whatever --concurrency is "
                   "(default 4 x --concurrency; the embedded model: 1)")
    g.add_argument("--structured-output", choices=["auto", *DIALECTS], default="auto",
                   help="how the output schema is sent (default auto: per provider, degrading when refused)")
    g.add_argument("--timeout", type=positive_float,
                   help="seconds per LM request (default 120; the embedded local model: 600)")
    g.add_argument("--max-tokens", type=positive_int, default=512,
                   help="completion token limit per call (default: 512)")
    g.add_argument("--temperature", type=non_negative_float, default=0.0,
                   help="sampling temperature of every call (default 0; recorded in the run identity)")
    g.add_argument("--retry-attempts", type=positive_int, default=4, help="attempts per call (default 4)")
    g.add_argument("--retry-base", type=non_negative_float, default=2.0,
                   help="first backoff in seconds (doubles, jittered; default 2)")
    g.add_argument("--retry-cap", type=non_negative_float, default=30.0,
                   help="longest wait between attempts, Retry-After included (default 30)")
    g.add_argument("--transport", choices=["auto", "litellm"], default="auto",
                   help="auto: OpenAI-compatible servers (openai/<alias> --api-base, the embedded model) get "
                        "teammed's direct HTTP client, everything else litellm; litellm: litellm for all "
                        "(default: auto)")
    g.add_argument("--no-cache", action="store_true", help="do not read or write the response cache")
    g.add_argument("--cache-dir", type=Path, help="response cache directory (default ~/.cache/teammed/responses)")
