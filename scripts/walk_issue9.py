"""Walk issue 9's "How we will check" paragraph through the `teammed` executable (subprocesses),
against the scripted backend and the loopback fake OpenAI server of the tests. Prints PASS/FAIL
per point. Usage: ``python scripts/walk_issue9.py`` from a checkout with teammed installed."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from tests.fake_openai import FakeOpenAI, completion  # noqa: E402

W = Path(tempfile.mkdtemp(prefix="teammed-walk-"))
TM = shutil.which("teammed") or str(Path(sys.executable).with_name("teammed"))
ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
DATA = str(REPO / "data" / "demo.jsonl")  # the 20 questions shipped with teammed


def tm(*args, env=None, timeout=300):
    t = time.time()
    p = subprocess.run([TM, *map(str, args)], capture_output=True, text=True, env=env or ENV, timeout=timeout)
    return p.returncode, p.stderr.strip().splitlines()[-1:] if p.stderr.strip() else [], time.time() - t


def rows(d):
    return [json.loads(line) for line in (Path(d) / "results.jsonl").read_text().splitlines() if line.strip()]


def out(point, ok, detail):
    print(f"[{'PASS' if ok else 'FAIL'}] {point}: {detail}", flush=True)


S = ["--model", "scripted", "--n-agents", "2"]
# 1. resume with another preset or dataset is refused and nothing is appended
r = W / "r1"
tm("run", "--dataset", DATA, "--split", "all", "--preset", "base", *S, "--n", "6", "--out", r)
before = (r / "results.jsonl").read_bytes()
rc, err, _ = tm("run", "--dataset", DATA, "--split", "all", "--preset", "all", *S, "--n", "6", "--out", r, "--resume")
rc2, err2, _ = tm(
    "run", "--dataset", "demo", "--split", "test", "--preset", "base", *S, "--n", "6", "--out", r, "--resume"
)
out(
    "resume with another preset/dataset",
    rc == 2 and rc2 == 2 and (r / "results.jsonl").read_bytes() == before,
    f"exit {rc}/{rc2}; {err} {err2}",
)
# 2. torn last line then --resume gives each question once
r = W / "r2"
tm("run", "--dataset", DATA, "--split", "all", "--preset", "base", *S, "--n", "8", "--out", r)
lines = (r / "results.jsonl").read_text().splitlines()
(r / "results.jsonl").write_text("\n".join(lines[:5]) + "\n" + lines[5][:40])
rc, err, _ = tm("run", "--dataset", DATA, "--split", "all", "--preset", "base", *S, "--n", "8", "--out", r, "--resume")
ids = [x["id"] for x in rows(r)]
summ = json.loads((r / "summary.json").read_text())
out(
    "torn last line + --resume",
    rc == 0 and len(ids) == len(set(ids)) == 8 and summ["n"] == 8,
    f"exit {rc}; {len(ids)} rows, {len(set(ids))} distinct, summary n={summ['n']}",
)


# 3. a second concurrent run into the same directory is refused
RELEASE = threading.Event()  # the first run's calls hang until both refusals were seen


def slow(n, body):
    RELEASE.wait(timeout=120)
    return 200, {}, completion("garbage")


with FakeOpenAI(slow) as srv:
    r = W / "r3"
    env = {**ENV, "OPENAI_API_KEY": "sk-test"}
    args = [
        "run",
        "--dataset",
        DATA,
        "--split",
        "all",
        "--system",
        "zero_shot",
        "--model",
        "openai/fake",
        "--api-base",
        srv.api_base,
        "--no-cache",
        "--n",
        "10",
        "--out",
        r,
    ]
    first = subprocess.Popen([TM, *map(str, args)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(4)
    rc, err, dt = tm(*args, env=env)
    rcr, errr, dtr = tm(*args, "--resume", env=env)
    RELEASE.set()
    first.wait(timeout=120)
    n_rows = len(rows(r))
    out(
        "second concurrent run refused",
        rc == 2 and rcr == 2 and n_rows == 10,
        f"plain: exit {rc} after {dt:.1f}s; {err}; with --resume: exit {rcr} after {dtr:.1f}s; {errr}; "
        f"first run exit {first.returncode}, {n_rows} rows",
    )
# 4. a garbage server gives n_failed = n
with FakeOpenAI(lambda n, b: (200, {}, completion("I think the answer is probably something"))) as srv:
    r = W / "r4"
    env = {**ENV, "OPENAI_API_KEY": "sk-test"}
    rc, err, dt = tm(
        "run",
        "--dataset",
        DATA,
        "--split",
        "all",
        "--preset",
        "base",
        "--n-agents",
        "2",
        "--model",
        "openai/fake",
        "--api-base",
        srv.api_base,
        "--no-cache",
        "--n",
        "5",
        "--out",
        r,
        env=env,
    )
    s = json.loads((r / "summary.json").read_text()) if (r / "summary.json").exists() else {}
    out(
        "garbage server -> n_failed = n",
        s.get("n_failed") == s.get("n") == 5,
        f"exit {rc}; n={s.get('n')} n_failed={s.get('n_failed')}; {err}",
    )
# 5. a 401 or a dead server stops the run non-zero within a minute; search writes no Special Set
unauth = lambda n, b: (  # noqa: E731
    401,
    {},
    {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error", "code": "invalid_api_key"}},
)
with FakeOpenAI(unauth) as srv:
    env = {**ENV, "OPENAI_API_KEY": "sk-wrong"}
    rc, err, dt = tm(
        "run",
        "--dataset",
        DATA,
        "--split",
        "all",
        "--preset",
        "base",
        "--model",
        "openai/fake",
        "--api-base",
        srv.api_base,
        "--no-cache",
        "--out",
        W / "r5",
        env=env,
    )
    out("401 server stops the run", rc != 0 and dt < 60, f"exit {rc} after {dt:.1f}s; {err}")
    rc, err, dt = tm(
        "search",
        "--dataset",
        DATA,
        "--model",
        "openai/fake",
        "--api-base",
        srv.api_base,
        "--no-cache",
        "--trials",
        "2",
        "--out",
        W / "s5",
        env=env,
    )
    specials = (
        [p for p in (W / "s5").rglob("*.json") if "special" in p.read_text()[:200].lower()]
        if (W / "s5").exists()
        else []
    )
    out(
        "search against 401 writes no Special Set",
        rc != 0 and not specials,
        f"exit {rc} after {dt:.1f}s; files {specials}; {err}",
    )
env = {**ENV, "OPENAI_API_KEY": "sk-test"}
rc, err, dt = tm(
    "run",
    "--dataset",
    DATA,
    "--split",
    "all",
    "--preset",
    "base",
    "--model",
    "openai/fake",
    "--api-base",
    "http://127.0.0.1:9",
    "--no-cache",
    "--out",
    W / "r5b",
    env=env,
)
out("dead server stops the run", rc != 0 and dt < 60, f"exit {rc} after {dt:.1f}s; {err}")
# 6. search then run --config on the same file evaluate zero tuning questions (and tune, this session's gap)
rc, err, _ = tm("search", "--dataset", DATA, *S[:2], "--trials", "2", "--out", W / "s6")
special = next(p for p in (W / "s6").glob("*.json"))
tuned = set(json.loads(special.read_text())["tuning"]["question_ids"])
rc2, err2, _ = tm("run", "--dataset", DATA, "--split", "all", "--config", special, *S[:2], "--out", W / "r6")
got = {x["id"] for x in rows(W / "r6")}
out(
    "search -> run --config",
    rc == 0 and rc2 == 0 and got and not got & tuned,
    f"{len(tuned)} tuned, {len(got)} run, overlap {len(got & tuned)}; {err2}",
)


# 7. a repeated run served from cache reports the same tokens/question as the first
def schema(n, body):
    from teammed.backends.scripted import schema_example

    fmt = body.get("response_format") or {}
    sch = fmt.get("json_schema", {}).get("schema") or fmt.get("schema") or {"properties": {}}
    return 200, {}, completion(json.dumps(schema_example(sch)), prompt_tokens=100, completion_tokens=10)


with FakeOpenAI(schema) as srv:
    env = {**ENV, "OPENAI_API_KEY": "sk-test"}
    flags = [
        "--dataset",
        DATA,
        "--split",
        "all",
        "--system",
        "zero_shot",
        "--model",
        "openai/fake",
        "--api-base",
        srv.api_base,
        "--cache-dir",
        W / "cache",
        "--n",
        "5",
    ]
    tm("run", *flags, "--out", W / "c1", env=env)
    calls = len(srv.requests)
    tm("run", *flags, "--out", W / "c2", env=env)
    a, b = (json.loads((W / d / "summary.json").read_text()) for d in ("c1", "c2"))
    k = "prompt_tokens_per_question"
    out(
        "cached rerun, same tokens/question",
        a.get(k) == b.get(k) and len(srv.requests) == calls and b.get("cache_hits"),
        f"{k} {a.get(k)} vs {b.get(k)}; second run made {len(srv.requests) - calls} requests, "
        f"cache_hits {b.get('cache_hits')}",
    )
