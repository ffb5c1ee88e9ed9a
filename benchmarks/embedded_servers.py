"""llama-cpp-python's server against xllamacpp's on the embedded GGUF, side by side (issue 48, item 1; not a test).

Both serve `teammed.backends.local.default_gguf()` (SmolLM2-135M, Q4_1) on loopback with one slot and the
same threads. Each round sends both the same requests in turn (interleaved, so a busy machine slows
both alike): a MedQA hard question (from ``--published``'s files) in teammed's JSON-schema dialect for
llama.cpp (``{"type": "json_object", "schema": ...}``), once with ``max_tokens=1`` (the prompt's time)
and once with ``max_tokens=128`` (the prompt's and the answer's). Prompt tokens per second are the
first request's prompt tokens over its time; generation tokens per second the second's extra
completion tokens over its extra time. Also: start-up to the first answer, and which structured
dialects each honours (the answer parses and fits the schema's enum).

    python benchmarks/embedded_servers.py --published ../shared/medagentsbench/output [--rounds 4]

Prints one JSON document.
"""

from __future__ import annotations

import argparse
import ast
import json
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from teammed.backends.local import LocalServer, default_gguf, free_port
from teammed.data.published import published_files

SCHEMA = {"type": "object", "required": ["reasoning", "answer", "confidence"],
          "properties": {"reasoning": {"type": "string"}, "answer": {"type": "string", "enum": list("ABCDE")},
                         "confidence": {"type": "string", "enum": ["High", "Medium", "Low"]}}}
DIALECTS = {"json_object_schema": {"type": "json_object", "schema": SCHEMA},
            "json_schema": {"type": "json_schema", "json_schema": {"name": "answer", "schema": SCHEMA}}}
XL = """
import sys, threading, xllamacpp
p = xllamacpp.CommonParams()
p.model.path, p.n_ctx, p.n_parallel, p.port = sys.argv[1], 8192, 1, int(sys.argv[2])
p.hostnames = ["127.0.0.1"]
p.cpuparams.n_threads = p.cpuparams_batch.n_threads = int(sys.argv[3])
server = xllamacpp.Server(p)
print("ready", flush=True)
threading.Event().wait()
"""


class XLServer:
    """xllamacpp's server in a child process, on a free port."""

    def __init__(self, threads: int) -> None:
        self.port = free_port()
        self.process = subprocess.Popen([sys.executable, "-c", XL, str(default_gguf()), str(self.port), str(threads)],
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert self.process.stdout is not None
        if self.process.stdout.readline().strip() != "ready":
            raise RuntimeError("xllamacpp's server did not start")
        self.api_base = f"http://127.0.0.1:{self.port}/v1"

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


def ask(api_base: str, question: str, *, max_tokens: int, fmt: dict[str, Any]) -> tuple[float, dict[str, Any], str]:
    body = {"model": "m", "temperature": 0, "max_tokens": max_tokens, "response_format": fmt,
            "messages": [{"role": "system", "content": "You are a careful physician. Answer in JSON."},
                         {"role": "user", "content": question}]}
    request = urllib.request.Request(f"{api_base}/chat/completions", data=json.dumps(body).encode(),
                                     headers={"content-type": "application/json"})
    sent = time.perf_counter()
    reply = json.loads(urllib.request.urlopen(request, timeout=600).read())
    return time.perf_counter() - sent, reply.get("usage") or {}, reply["choices"][0]["message"]["content"]


def honours(text: str) -> bool:
    try:
        value = json.loads(text)
    except ValueError:
        return False
    return isinstance(value, dict) and value.get("answer") in list("ABCDE") and value.get("confidence") in (
        "High", "Medium", "Low")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--published", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    rows = json.loads(published_files(args.published, dataset="medqa")[0].read_text())
    questions = []
    for row in rows[: args.rounds]:
        options = row["options"] if isinstance(row["options"], dict) else ast.literal_eval(row["options"])
        questions.append(row["question"] + "\n" + "\n".join(f"{k}) {v}" for k, v in options.items()))
    servers: dict[str, Any] = {}
    started: dict[str, float] = {}
    t = time.perf_counter()
    servers["llama-cpp-python"] = LocalServer(n_threads=args.threads).start()
    ask(servers["llama-cpp-python"].api_base, "Hi", max_tokens=1, fmt=DIALECTS["json_object_schema"])
    started["llama-cpp-python"] = time.perf_counter() - t
    t = time.perf_counter()
    servers["xllamacpp"] = XLServer(args.threads)
    ask(servers["xllamacpp"].api_base, "Hi", max_tokens=1, fmt=DIALECTS["json_object_schema"])
    started["xllamacpp"] = time.perf_counter() - t
    found: dict[str, dict[str, list[float]]] = {name: {"prompt_tps": [], "gen_tps": []} for name in servers}
    dialects: dict[str, dict[str, bool]] = {name: {} for name in servers}
    usage: dict[str, list[dict[str, Any]]] = {name: [] for name in servers}
    try:
        for question in questions:
            for name, server in servers.items():
                first_s, first, _ = ask(server.api_base, question, max_tokens=1, fmt=DIALECTS["json_object_schema"])
                full_s, full, text = ask(server.api_base, question, max_tokens=128,
                                         fmt=DIALECTS["json_object_schema"])
                found[name]["prompt_tps"].append(first["prompt_tokens"] / first_s)
                extra = full.get("completion_tokens", 0) - first.get("completion_tokens", 0)
                if extra > 0 and full_s > first_s:
                    found[name]["gen_tps"].append(extra / (full_s - first_s))
                usage[name].append({"prompt": full.get("prompt_tokens"), "completion": full.get("completion_tokens"),
                                    "cached": (full.get("prompt_tokens_details") or {}).get("cached_tokens")})
        for name, server in servers.items():
            for dialect, fmt in DIALECTS.items():
                try:
                    dialects[name][dialect] = honours(ask(server.api_base, questions[0], max_tokens=160, fmt=fmt)[2])
                except urllib.error.HTTPError as exc:  # refused: not honoured
                    dialects[name][dialect] = False
                    print(f"{name} refused {dialect}: HTTP {exc.code}", file=sys.stderr)
    finally:
        servers["llama-cpp-python"].stop()
        servers["xllamacpp"].stop()
    print(json.dumps({
        "gguf": default_gguf().name, "rounds": len(questions), "threads": args.threads,
        "startup_to_first_answer_s": {k: round(v, 2) for k, v in started.items()},
        "prompt_tokens_per_s_median": {k: round(statistics.median(v["prompt_tps"]), 1) for k, v in found.items()},
        "generation_tokens_per_s_median": {k: round(statistics.median(v["gen_tps"]), 1) if v["gen_tps"] else None
                                           for k, v in found.items()},
        "dialects_honoured": dialects, "usage": usage,
    }, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
