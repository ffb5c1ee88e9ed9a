"""A fixed-latency OpenAI-compatible fake server on loopback, for benchmarks (not a test).

``POST /v1/chat/completions`` waits ``--latency`` seconds, then answers with JSON that is
valid under the request's ``response_format`` schema (``json_schema``, or llama.cpp's
``json_object`` + ``schema``): enum letters drawn at random, rankings as permutations,
numbers inside their bounds, short plausible clinical sentences for strings. The draws are
seeded by ``--seed`` and the request itself, so the same request gets the same answer
whatever order threads arrive in, and different requests get varied answers.

Usage is counted with a real tokenizer (tiktoken ``cl100k_base``, the way OpenAI counts chat
messages: 3 tokens per message plus its role and content, plus 3 to prime the reply). Each
request is logged as one JSONL line: ``start``/``end`` (``time.time()``), ``title`` (the
schema's title: the calling behaviour), ``prompt_tokens``, ``completion_tokens``.

``--prefix-cache`` emulates a block-level prefix cache as vLLM's automatic prefix caching keeps
one: the prompt (the messages rendered in order, `prompt_token_ids`, exactly as many tokens as
are counted) is cut into 16-token blocks, each identified by the hash of every token up to and
including it (`block_hashes`); a block is cached when that hash was seen in an earlier request
in this server's lifetime (a bounded LRU, default 1M blocks). The leading cached blocks are
reported as ``usage.prompt_tokens_details.cached_tokens`` (16 per block; as in vLLM, the last
prompt token is always computed, so a prompt never counts as entirely cached) and logged as
``cached_tokens``. Blocks count as seen when the request arrives. ``--log-prompts`` adds each
request's rendered text (``prompt``) to its log line.

    python benchmarks/fake_server.py --latency 0.5 --log requests.jsonl [--port 0] [--prefix-cache]

prints ``http://127.0.0.1:PORT/v1`` on its first stdout line once it listens.
"""

from __future__ import annotations

import argparse
import array
import functools
import hashlib
import importlib.util
import json
import os
import random
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

__all__ = ["FakeServer", "schema_answer", "count_prompt_tokens", "encoder", "prompt_token_ids", "block_hashes",
           "PrefixCache", "BLOCK_TOKENS"]

WORDS = ("the presentation favours this option because the history, examination and laboratory findings fit "
         "its typical pattern while the alternatives would explain fewer of the key features; the timeline "
         "and risk factors support the diagnosis and the next step follows current guidelines for management "
         "of an adult with these findings, though imaging and a repeat test would confirm it").split()


def _tokenizer_dir() -> str | None:
    """litellm ships cl100k_base with its tokenizers: use it offline, without importing litellm."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "litellm_core_utils" / "tokenizers"
    return str(path) if path.is_dir() else None


@functools.cache
def encoder() -> Any:
    if "TIKTOKEN_CACHE_DIR" not in os.environ and _tokenizer_dir():
        os.environ["TIKTOKEN_CACHE_DIR"] = _tokenizer_dir() or ""
    import tiktoken

    return tiktoken.get_encoding("cl100k_base")


def _text(content: Any) -> str:
    if isinstance(content, list):  # multimodal parts: count the text parts
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content or "")


# Stand-ins for a chat template's special tokens (ids past cl100k_base's ordinary vocabulary).
_START, _SEP, _END = 100264, 100265, 100266
BLOCK_TOKENS = 16


def prompt_token_ids(messages: list[dict[str, Any]]) -> list[int]:
    """The prompt as a server's chat template feeds it to the model, one token sequence: per message
    a start marker, its role, a separator, its content (and name), an end marker; then 3 tokens that
    prime the reply (image parts are not tokens here)."""
    enc = encoder()
    ids: list[int] = []
    for message in messages:
        ids.append(_START)
        ids += enc.encode(str(message.get("role", "")))
        if message.get("name"):
            ids.append(_SEP)
            ids += enc.encode(str(message["name"]))
        ids.append(_SEP)
        ids += enc.encode(_text(message.get("content")))
        ids.append(_END)
    return [*ids, _START, _SEP, _END]  # the reply's priming tokens


def count_prompt_tokens(messages: list[dict[str, Any]]) -> int:
    """OpenAI's chat accounting for cl100k models: 3 per message + role + content (+ 1 + name), + 3 for the
    reply: the length of `prompt_token_ids`."""
    return len(prompt_token_ids(messages))


def block_hashes(tokens: Sequence[int], block: int = BLOCK_TOKENS) -> list[bytes]:
    """One hash per full ``block``-token block: of every token up to and including that block (a chain:
    each block's hash covers its parent's), so equal hashes mean equal prefixes. A partial last block
    has none, as in vLLM."""
    hashes: list[bytes] = []
    parent = b""
    for start in range(0, len(tokens) - len(tokens) % block, block):
        chunk = array.array("I", tokens[start:start + block]).tobytes()
        parent = hashlib.blake2b(parent + chunk, digest_size=16).digest()
        hashes.append(parent)
    return hashes


class PrefixCache:
    """A block-level prefix cache: ``lookup_and_store(tokens)`` returns how many leading tokens were
    cached (whole blocks seen before), then remembers every full block of ``tokens``. Least recently
    used blocks are dropped beyond ``capacity_blocks``. Thread-safe."""

    def __init__(self, capacity_blocks: int = 1 << 20, block: int = BLOCK_TOKENS):
        self.capacity_blocks = capacity_blocks
        self.block = block
        self._blocks: OrderedDict[bytes, None] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._blocks)

    def lookup_and_store(self, tokens: Sequence[int]) -> int:
        hashes = block_hashes(tokens, self.block)
        # the last prompt token is always computed (its logits start the reply): at most len - 1 cached
        usable = max(0, (len(tokens) - 1) // self.block)
        with self._lock:
            hit = 0
            for digest in hashes[:usable]:
                if digest not in self._blocks:
                    break
                self._blocks.move_to_end(digest)
                hit += 1
            for digest in hashes[hit:]:
                self._blocks[digest] = None
                self._blocks.move_to_end(digest)
            while len(self._blocks) > self.capacity_blocks:
                self._blocks.popitem(last=False)
        return hit * self.block


def _sentence(rng: random.Random, max_chars: int | None) -> str:
    start = rng.randrange(len(WORDS))
    n = rng.randint(8, 24)
    words = [WORDS[(start + i) % len(WORDS)] for i in range(n)]
    text = " ".join(words).capitalize() + "."
    if max_chars is not None and len(text) > max_chars:
        text = text[:max(1, max_chars)].rstrip()
    return text


def _resolve(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = defs.get(node["$ref"].split("/")[-1], {})
    return node


def schema_answer(schema: dict[str, Any], rng: random.Random, defs: dict[str, Any] | None = None) -> Any:
    """A random value valid under ``schema`` (the subset teammed and DSPy emit)."""
    defs = {**(defs or {}), **schema.get("$defs", {}), **schema.get("definitions", {})}
    schema = _resolve(schema, defs)
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [s for s in schema[key] if _resolve(s, defs).get("type") != "null"] or schema[key]
            return schema_answer(rng.choice(options), rng, defs)
    if "allOf" in schema:
        return schema_answer(schema["allOf"][0], rng, defs)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return rng.choice(schema["enum"])
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or "properties" in schema:
        return {name: schema_answer(sub, rng, defs) for name, sub in schema.get("properties", {}).items()}
    if kind == "array":
        item = _resolve(schema.get("items", {}), defs)
        low = int(schema.get("minItems", 1))
        high = int(schema.get("maxItems", max(low, 3)))
        if "enum" in item and (schema.get("uniqueItems") or low == high == len(item["enum"])):
            values = list(item["enum"])  # a ranking: a permutation of every allowed letter
            rng.shuffle(values)
            return values[:high]
        return [schema_answer(item, rng, defs) for _ in range(rng.randint(low, max(low, high)))]
    if kind == "string":
        return _sentence(rng, schema.get("maxLength"))
    if kind == "integer":
        low = int(schema.get("minimum", 0))
        return rng.randint(low, int(schema.get("maximum", low + 5)))
    if kind == "number":
        low = float(schema.get("minimum", 0.0))
        return round(rng.uniform(low, float(schema.get("maximum", low + 1.0))), 2)
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "null":
        return None
    return _sentence(rng, 200)


FREE_TEXT_CAP = 2000  # characters: teammed's schema caps each free-text field there (and cuts a longer one)


def _free_text(value: Any, schema: dict[str, Any], defs: dict[str, Any], found: list[tuple[Any, Any, int]]) -> None:
    """Where ``value`` holds free text: (container, key, most characters) of each string the schema leaves free
    (no enum, const, pattern or format)."""
    schema = _resolve(schema, defs)
    if isinstance(value, dict):
        places = [(key, schema.get("properties", {}).get(key, {})) for key in value]
    elif isinstance(value, list):
        places = [(index, schema.get("items", {})) for index in range(len(value))]
    else:
        return
    for key, sub in places:
        sub = _resolve(sub, defs)
        if isinstance(value[key], str) and not {"enum", "const", "pattern", "format"} & set(sub):
            found.append((value, key, min(FREE_TEXT_CAP, int(sub.get("maxLength", FREE_TEXT_CAP)))))
        else:
            _free_text(value[key], sub, defs, found)


def pad_answer(value: Any, schema: dict[str, Any], tokens: int) -> Any:
    """``value`` with its free-text fields (strings the schema does not restrict, at any depth) lengthened, the
    deficit shared among them, until the whole answer is about ``tokens`` tokens: a server as verbose as a model
    whose mean answer is that long. A field stops at its maxLength or `FREE_TEXT_CAP` characters, so an answer
    with little free text stays shorter. Changes ``value`` in place and returns it."""
    defs = {**schema.get("$defs", {}), **schema.get("definitions", {})}
    fields: list[tuple[Any, Any, int]] = []
    _free_text(value, schema, defs, fields)
    filler = encoder().encode(" " + " ".join(WORDS * (tokens // len(WORDS) + 2)))
    while fields:
        deficit = tokens - len(encoder().encode(json.dumps(value)))
        open_fields = [(c, k, most) for c, k, most in fields if len(c[k]) < most]
        if deficit <= 0 or not open_fields:
            break
        text = encoder().decode(filler[:max(1, deficit // len(open_fields))])
        for container, key, most in open_fields:
            container[key] += text[:most - len(container[key])]
    return value


def _schema_of(request: dict[str, Any]) -> dict[str, Any] | None:
    fmt = request.get("response_format") or {}
    if not isinstance(fmt, dict):
        return None
    if fmt.get("type") == "json_schema":
        return (fmt.get("json_schema") or {}).get("schema")
    return fmt.get("schema")


class FakeServer:
    """``with FakeServer(latency_s=0.5, log_path=...) as server:`` serves at ``server.api_base``."""

    def __init__(self, *, latency_s: float = 0.0, log_path: Path | str | None = None, seed: int = 0,
                 port: int = 0, prefix_cache: bool = False, cache_blocks: int = 1 << 20, log_prompts: bool = False,
                 answer_tokens: int | None = None):
        self.latency_s = latency_s
        self.answer_tokens = answer_tokens
        self.seed = seed
        self.prefix_cache = PrefixCache(cache_blocks) if prefix_cache else None
        self.log_prompts = log_prompts
        self._log = Path(log_path).open("a") if log_path else None
        self._lock = threading.Lock()
        self.count = 0
        encoder()  # load the tokenizer before the first request is timed
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, like a real API
            # TCP_NODELAY, as uvicorn, llama.cpp and vLLM set it: without it the body (a second
            # write after the headers) waits for the client's delayed ACK, ~40 ms per response
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                self._send(200, {"object": "list", "data": [{"id": "fake", "object": "model"}]})

            def do_POST(self) -> None:  # noqa: N802
                start = time.time()
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                try:
                    request = json.loads(body or b"{}")
                except json.JSONDecodeError:
                    self._send(400, {"error": {"message": "body is not JSON", "type": "invalid_request_error"}})
                    return
                reply, record = outer.answer(request, body)
                wait = outer.latency_s - (time.time() - start)
                if wait > 0:
                    time.sleep(wait)
                end = time.time()  # before the answer goes out: once it is out, the client may send the next
                self._send(200, reply)
                if outer._log is not None:
                    line = json.dumps({"start": start, "end": end, "peer": self.client_address[1], **record})
                    with outer._lock:
                        outer._log.write(line + "\n")
                        outer._log.flush()

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 1024

        self.server = Server(("127.0.0.1", port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def answer(self, request: dict[str, Any], body: bytes) -> tuple[dict[str, Any], dict[str, Any]]:
        """The completion for ``request`` and what the log records about it."""
        digest = hashlib.sha256(str(self.seed).encode() + b"\0" + body).digest()
        rng = random.Random(int.from_bytes(digest[:8], "big"))
        schema = _schema_of(request)
        value = schema_answer(schema, rng) if schema else {}
        if self.answer_tokens:
            value = pad_answer(value, schema or {}, self.answer_tokens)
        content = json.dumps(value)
        messages = request.get("messages") or []
        prompt = count_prompt_tokens(messages)
        completion = len(encoder().encode(content))
        with self._lock:
            self.count += 1
            n = self.count
        usage: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": completion,
                                 "total_tokens": prompt + completion}
        title = (schema or {}).get("title") or "?"
        record: dict[str, Any] = {"n": n, "title": title, "messages": len(messages), "prompt_tokens": prompt,
                                  "completion_tokens": completion}
        if self.prefix_cache is not None:
            cached = self.prefix_cache.lookup_and_store(prompt_token_ids(messages))
            usage["prompt_tokens_details"] = {"cached_tokens": cached}
            record["cached_tokens"] = cached
        if self.log_prompts:
            record["prompt"] = "\n".join(_text(m.get("content")) for m in messages)
        reply = {
            "id": f"chatcmpl-fake-{n}", "object": "chat.completion", "created": int(time.time()),
            "model": request.get("model", "fake"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": usage,
        }
        return reply, record

    def __enter__(self) -> FakeServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        if self._log is not None:
            self._log.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency", type=float, default=0.0, help="seconds every request takes (default 0)")
    parser.add_argument("--log", type=Path, help="append one JSONL line per request here")
    parser.add_argument("--seed", type=int, default=0, help="seed of the answers' random draws")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    parser.add_argument("--prefix-cache", action="store_true",
                        help="emulate a 16-token-block prefix cache and report usage.prompt_tokens_details."
                             "cached_tokens")
    parser.add_argument("--cache-blocks", type=int, default=1 << 20, help="blocks the prefix cache keeps (LRU)")
    parser.add_argument("--log-prompts", action="store_true", help="log each request's rendered text")
    parser.add_argument("--answer-tokens", type=int,
                        help="lengthen each answer's free-text fields (each within its cap) towards this many tokens")
    args = parser.parse_args(argv)
    with FakeServer(latency_s=args.latency, log_path=args.log, seed=args.seed, port=args.port,
                    prefix_cache=args.prefix_cache, cache_blocks=args.cache_blocks,
                    log_prompts=args.log_prompts, answer_tokens=args.answer_tokens) as server:
        print(server.api_base, flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
