"""What the documentation claims, where no other test showed it (issue 21, item 3).

README.md and docs/*.md name, beside each quantitative or behavioural claim, the test or
benchmark that shows it (the convention is in docs/index.md). The first test here keeps those
names true: every `tests/test_*.py::name` the docs cite exists and defines that test. The
others are the claims no test checked before, grouped by the page that makes them.
"""

from __future__ import annotations

import functools
import json
import re
import subprocess
import zlib
from pathlib import Path
from types import SimpleNamespace

import pytest

from teammed.cli import build_parser, main
from tests.fake_openai import FakeOpenAI, completion

ROOT = Path(__file__).resolve().parents[1]
DOC_FILES = (ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")))
SCRIPTED = ["--model", "scripted", "--no-cache"]

TEST_REFERENCE = re.compile(r"\b(tests/test_\w+\.py)(?:::(\w+))?")
SCRIPT_REFERENCE = re.compile(r"\b((?:benchmarks|scripts)/\w+\.py)\b")
COMMIT = re.compile(r"(?:\bat\s+|git show )([0-9a-f]{7,40})\b")  # "at 3ee0906", "git show 3ee0906:path"


def _git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)


@functools.cache
def _full_history() -> bool:
    """Whether this checkout holds its whole history (not a shallow clone, not an export without .git)."""
    done = _git("rev-parse", "--is-shallow-repository")
    return done.returncode == 0 and done.stdout.strip() == "false"


def _in_history(commit: str, path: str) -> bool:
    """Whether ``path`` existed at ``commit`` (a script the docs cite as it was then). Without the whole
    history it cannot be checked, and is taken on trust (the made-up case below is skipped then)."""
    return not _full_history() or _git("cat-file", "-e", f"{commit}:{path}").returncode == 0


# ---------------------------------------------------------------- the references themselves
def missing_references(text: str) -> list[str]:
    """Every test file, test function or script ``text`` names that does not exist, as a message."""
    problems = []
    for match in TEST_REFERENCE.finditer(text):
        path, name = match.groups()
        file = ROOT / path
        if not file.is_file():
            problems.append(f"{match.group(0)}: {path} does not exist")
        elif name is not None and not (name.startswith("test_") and re.search(
                rf"^(?:async )?def {name}\(", file.read_text(encoding="utf-8"), flags=re.M)):
            problems.append(f"{match.group(0)}: {path} defines no test {name}")
    for match in SCRIPT_REFERENCE.finditer(text):
        path, near = match.group(1), text[max(0, match.start() - 120):match.end() + 120]
        if not (ROOT / path).is_file() and not any(_in_history(c, path) for c in COMMIT.findall(near)):
            problems.append(f"{path} does not exist (nor at a commit named beside it)")
    return problems


def test_every_test_the_docs_name_exists():
    cited, problems = set(), []
    for doc in DOC_FILES:
        text = doc.read_text(encoding="utf-8")
        cited |= {m.group(0) for m in TEST_REFERENCE.finditer(text) if m.group(2)}
        problems += [f"{doc.relative_to(ROOT)}: {p}" for p in missing_references(text)]
    assert not problems, "\n".join(problems)
    assert len(cited) > 150  # the docs do cite their tests: a parser that found nothing would pass vacuously


@pytest.mark.parametrize("made_up", [
    "`tests/test_accounting.py::test_no_such_test`",  # a real file, a test it does not define
    "`tests/test_nowhere.py::test_formula_matches_calls_for_every_subset`",  # no such file
    "`tests/test_accounting.py::_valid_subsets`",  # a helper, not a test
    "`python benchmarks/no_such_benchmark.py --seeds 3`",
    "`python benchmarks/no_such_benchmark.py`, as it was at 3ee0906",  # a commit that never held it
    "`benchmarks/runtime_arms.py` at 3ee0907",  # no such commit
    "`benchmarks/runtime_arms.py` with tokens=2000000",  # a number is not a commit
])
def test_a_made_up_reference_is_caught(made_up):
    if " at 3ee090" in made_up and not _full_history():
        pytest.skip("a commit named in the docs is checked only in a clone with its whole history")
    assert missing_references(made_up)


# ---------------------------------------------------------------- README.md and docs/index.md
def test_the_supported_pythons_are_3_11_and_3_12():
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["requires-python"] == ">=3.11,<3.13"


def test_plain_pytest_skips_the_real_model_tests_and_run_local_model_keeps_them(monkeypatch):
    from tests import conftest

    class Item:
        def __init__(self, *keywords: str):
            self.keywords, self.markers = dict.fromkeys(keywords, True), []

        def add_marker(self, marker):
            self.markers.append(marker)

    monkeypatch.delenv("TEAMMED_RUN_LOCAL_MODEL", raising=False)
    for flag, marks in ((False, ["skip"]), (True, ["xdist_group"])):
        other, real = Item(), Item("local_model")
        items = [other, real]
        conftest.pytest_collection_modifyitems(SimpleNamespace(getoption=lambda name, flag=flag: flag), items)
        assert [m.name for m in real.markers] == marks and other.markers == []
        assert items == [real, other]  # the longest serial group is handed out first
    assert real.markers[0].args == ("local_model",)  # kept on one worker: one model server at a time
    import tomllib

    addopts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["addopts"].split()
    assert {"-n", "auto", "--maxprocesses", "4", "--dist", "loadgroup"} <= set(addopts)  # what the README says
    for module in ("test_local_model.py", "test_local_server_independent.py"):
        assert "pytestmark = pytest.mark.local_model" in (ROOT / "tests" / module).read_text()


def test_with_no_backend_given_the_embedded_model_runs(monkeypatch):
    import contextlib

    from teammed.backends import resolve
    from teammed.cli import spec_of
    from teammed.experiments._backend import open_backends

    opened = []
    monkeypatch.setattr(resolve, "open_deployments", lambda specs, **kwargs: opened.append(specs)
                        or contextlib.nullcontext([]))
    with open_backends(spec_of(build_parser().parse_args(["run", "--dataset", "demo"])).backend, command="run"):
        pass
    assert opened == [["local"]]


def test_run_prints_its_header_and_progress_on_stderr_and_its_summary_on_stdout(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["run", "--dataset", "demo", "--n", "3", *SCRIPTED, "--out", str(out)]) == 0
    captured = capsys.readouterr()
    err = captured.err.splitlines()
    assert err[0] == f"base | demo (test/eval) | seed 111 | 3 questions | scripted -> {out}"
    progress = [line for line in err if "ETA" in line]
    assert len(progress) == 3 and "3/3" in progress[-1]
    for field in ("accuracy", "calls", "tokens", "failed"):
        assert field in progress[-1], field
    summary = [line for line in captured.out.splitlines() if line.startswith("base seed 111: accuracy")]
    assert len(summary) == 1 and "(majority class" in summary[0] and "billable tokens" in summary[0]
    assert "cache hits" in summary[0] and "parse fallbacks" in summary[0]
    assert "ETA" not in captured.out and "seed 111: accuracy" not in captured.err


def test_the_run_summary_holds_what_the_readme_lists(tmp_path):
    out = tmp_path / "run"
    assert main(["run", "--dataset", "demo", "--n", "3", *SCRIPTED, "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    listed = {"accuracy", "majority_baseline", "calls_per_question", "prompt_tokens_per_question",
              "completion_tokens_per_question", "cost_usd_per_question", "spent_prompt_tokens_per_question",
              "spent_cost_usd_per_question", "repaired", "ranking_repairs", "fallbacks", "parse_failures",
              "n_failed", "answer_spread"}
    assert listed <= set(summary), listed - set(summary)
    assert {"ece", "brier", "by_confidence"} <= set(summary["metrics"]["calibration"])


@pytest.mark.parametrize(("answers", "constant"), [
    ("A" * 9 + "B", True),  # 90% of 10
    ("A" * 8 + "BC", False),  # 80%
    ("A" * 9, False),  # one letter, but fewer than 10 answers
])
def test_a_constant_predictor_gives_one_letter_to_90_percent_of_at_least_10_answers(answers, constant):
    from teammed.answer_stats import answer_spread

    rows = [SimpleNamespace(prediction=a, failed=False, labeled=True, gold="A") for a in answers]
    assert answer_spread(rows).constant is constant


# ---------------------------------------------------------------- backends.md
def _option(parser_args: list[str], name: str):
    return getattr(build_parser().parse_args(parser_args), name)


@pytest.mark.parametrize("command", [
    ["run", "--dataset", "demo"], ["ask", "Q?", "--option", "A=x", "--option", "B=y"],
    ["compile", "--dataset", "demo", "--optimizer", "labeled", "--out", "p.json"], ["search", "--dataset", "demo"],
    ["tune", "--dataset", "demo", "--budget", "calls=10"], ["reproduce", "001-table1"],
], ids=lambda c: c[0])
def test_the_documented_defaults_are_every_commands_defaults(command):
    from teammed.cli import spec_of
    from teammed.experiments._backend import backend_options

    args = build_parser().parse_args(command)
    assert (args.temperature, args.max_tokens, args.concurrency) == (0.0, 512, 4)
    assert (args.retry_attempts, args.retry_base, args.retry_cap) == (4, 2.0, 30.0)
    options = backend_options(spec_of(args).backend, command=command[0])
    assert options.timeout_for() == 120.0 and options.timeout_for(local=True) == 600.0
    assert options.max_parallel_requests is None and options.default_parallel_requests == 4 * 4
    args = build_parser().parse_args([*command, "--concurrency", "3"])
    assert backend_options(spec_of(args).backend, command=command[0]).default_parallel_requests == 12


def test_a_run_stops_after_5_consecutive_failures_by_default():
    assert _option(["run", "--dataset", "demo"], "max_consecutive_failures") == 5


def test_answers_that_name_no_option_stop_the_run_after_5_in_a_row(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    out = tmp_path / "run"
    with FakeOpenAI(lambda n, body: (200, {}, completion("no idea at all"))) as server:
        code = main(["run", "--dataset", "demo", "--split", "all", "--n", "12", "--system", "zero_shot",
                     "--concurrency", "1", "--model", "openai/fake", "--api-base", server.api_base, "--no-cache",
                     "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 1 and "5 consecutive questions failed with the same NoAnswerError" in err
    assert "--resume --retry-failed" in err
    assert len((out / "results.jsonl").read_text().splitlines()) == 5  # the rest were left for the resume


def test_the_embedded_model_takes_one_request_at_a_time_with_the_llamacpp_dialect(monkeypatch):
    import contextlib

    from teammed.backends import resolve

    class Server:  # stands in for the llama.cpp server process
        model_path, api_base = "SmolLM2.gguf", "http://127.0.0.1:9/v1"

        def __init__(self, *args):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            pass

    monkeypatch.setattr(resolve, "LocalServer", Server)
    with contextlib.ExitStack() as stack:
        lm, questions_in_flight = resolve.open_lm("local", resolve.BackendOptions(default_parallel_requests=16),
                                                  stack=stack, concurrency=4)
        assert (lm.max_parallel_requests, questions_in_flight) == (1, 1)
        assert lm.structured_output == "json_object_schema" and lm.profile == "llamacpp"
        assert lm.timeout_s == 600.0 and lm.transport == "direct"


def test_one_call_of_a_hung_embedded_model_is_bounded_and_a_dead_ones_waits_are_short():
    from teammed.backends.retry import RetryPolicy

    policy = RetryPolicy()
    assert policy.worst_case_s(600.0) / 60 == pytest.approx(41.5)  # 4 hung requests of 600 s + 3 waits
    longest_waits = sum(policy.delay(k, rng=SimpleNamespace(uniform=lambda lo, hi: hi)) for k in range(3))
    assert longest_waits == pytest.approx(16.8)  # what a dead server's refused connections wait in all


@pytest.mark.parametrize(("model", "api_base", "dialect", "left_out"), [
    ("openai/gpt-4o-mini", None, "json_schema_strict", {"minLength", "maxLength"}),
    ("azure/my-deployment", None, "json_schema_strict", {"minLength", "maxLength"}),
    ("anthropic/claude-x", None, "json_schema",
     {"minLength", "maxLength", "minimum", "maximum", "minItems", "maxItems"}),
    ("gemini/gemini-2.0-flash", None, "json_schema", {"minLength", "maxLength", "additionalProperties"}),
    ("vertex_ai/gemini-2.0-flash", None, "json_schema", {"minLength", "maxLength", "additionalProperties"}),
    ("hosted_vllm/qwen", None, "json_schema", set()),
    ("ollama/llama3", None, "json_schema", {"minLength", "maxLength"}),
    ("ollama_chat/llama3", None, "json_schema", {"minLength", "maxLength"}),
    ("openai/my-alias", "http://127.0.0.1:8080/v1", "json_schema", {"minLength", "maxLength"}),
])
def test_each_provider_gets_the_documented_dialect_and_keywords(model, api_base, dialect, left_out):
    from teammed.backends.litellm_backend import LiteLLMBackend
    from teammed.schema import PROVIDER_PROFILES

    lm = LiteLLMBackend(model, api_base=api_base, api_key="k")
    assert lm.structured_output == dialect
    assert left_out <= PROVIDER_PROFILES[lm.profile]
    assert not PROVIDER_PROFILES[lm.profile] & {"enum", "type", "properties", "required", "items"}
    if not left_out:
        assert PROVIDER_PROFILES[lm.profile] == set()


@pytest.mark.parametrize(("model", "api_base", "transport"), [
    ("openai/my-alias", "http://127.0.0.1:8080/v1", "direct"),
    ("openai/gpt-4o-mini", None, "litellm"),
    ("anthropic/claude-x", None, "litellm"),
    ("hosted_vllm/qwen", "http://127.0.0.1:8000/v1", "litellm"),
])
def test_only_openai_compatible_servers_take_the_direct_client(model, api_base, transport):
    from teammed.backends.litellm_backend import LiteLLMBackend

    assert LiteLLMBackend(model, api_base=api_base, api_key="k").transport == transport
    assert LiteLLMBackend(model, api_base=api_base, api_key="k", transport="litellm").transport == "litellm"


def test_a_deployments_files_structured_output_overrides_the_choice(tmp_path):
    from teammed.backends.resolve import open_deployments

    path = tmp_path / "deployments.yaml"
    path.write_text("model_list:\n  - model_name: team\n    structured_output: json_object\n"
                    "    litellm_params: {model: openai/a, api_base: 'http://127.0.0.1:9/v1'}\n")
    with open_deployments([], deployments_file=path) as deployments:
        assert deployments[0].lm.structured_output == "json_object"


def test_the_reflection_model_is_refused_like_the_model(tmp_path, capsys):
    assert main(["compile", "--dataset", "demo", "--optimizer", "gepa", "--train", "2", "--val", "1", "--test", "2",
                 *SCRIPTED, "--reflection-model", "gpt-4o-mnii", "--out", str(tmp_path / "p.json")]) == 2
    err = capsys.readouterr().err
    assert "--reflection-model 'gpt-4o-mnii'" in err and "gpt-4o-mini" in err
    assert not (tmp_path / "p.json").exists()


def _direct_lm(api_base: str):
    from teammed.backends.litellm_backend import LiteLLMBackend
    from teammed.backends.retry import RetryPolicy

    return LiteLLMBackend("openai/fake", api_base=api_base, api_key="sk-test-key",
                          retry=RetryPolicy(attempts=2, base_s=0.01, cap_s=0.02))


def _ask(lm):
    import dspy

    from teammed.adapter import SchemaAdapter
    from teammed.signatures import InitialAssessment

    with dspy.context(lm=lm, adapter=SchemaAdapter()):
        return dspy.Predict(InitialAssessment)(question="q?", options={"A": "a", "B": "b"}, role="r",
                                               shared_context="")


ANSWER = json.dumps({"ranking": ["B", "A"], "justification": "x", "facts": ["a", "b"], "confidence": "High"})


@pytest.fixture
def _no_network_settings(monkeypatch):
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "all_proxy",
                 "no_proxy", "SSL_CERT_FILE", "SSL_CERT_DIR"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.usefixtures("_no_network_settings")
def test_the_direct_client_decodes_deflate_and_asks_for_brotli_only_when_it_can_read_it():
    import importlib.util

    body = zlib.compress(json.dumps(completion(ANSWER)).encode())
    with FakeOpenAI(lambda n, b: (200, {"Content-Encoding": "deflate"}, body)) as server:
        assert _ask(_direct_lm(server.api_base)).ranking == ["B", "A"]
    assert len(server.requests) == 1  # read the first time, not retried as garbage
    asked = {part.strip() for part in server.headers[0]["accept-encoding"].split(",")}
    readable = importlib.util.find_spec("brotli") or importlib.util.find_spec("brotlicffi")
    assert {"gzip", "deflate"} <= asked and ("br" in asked) == bool(readable)


@pytest.mark.usefixtures("_no_network_settings")
def test_a_308_redirect_keeps_the_post_and_its_body():
    def handler(n, body):
        if n == 1:
            return 308, {"Location": "/v2/chat/completions"}, {"error": {"message": "moved"}}
        return 200, {}, completion(ANSWER)

    with FakeOpenAI(handler) as server:
        assert _ask(_direct_lm(server.api_base)).ranking == ["B", "A"]
    assert server.paths == ["/v1/chat/completions", "/v2/chat/completions"]
    assert server.requests[1] == server.requests[0]


@pytest.mark.usefixtures("_no_network_settings")
@pytest.mark.parametrize("variable", ["http_proxy", "ALL_PROXY", "all_proxy"])
def test_lower_case_and_all_proxy_variables_choose_the_proxy(monkeypatch, variable):
    with FakeOpenAI(lambda n, b: (200, {}, completion(ANSWER))) as proxy:
        monkeypatch.setenv(variable, f"http://127.0.0.1:{proxy.server.server_address[1]}")
        assert _ask(_direct_lm("http://model-server.test:8000/v1")).ranking == ["B", "A"]
    assert proxy.paths == ["http://model-server.test:8000/v1/chat/completions"]


@pytest.mark.usefixtures("_no_network_settings")
def test_ssl_cert_dir_makes_a_certificate_trusted(tmp_path, monkeypatch):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=60)
    subject_hash = subprocess.run(["openssl", "x509", "-hash", "-noout", "-in", str(cert)], check=True,
                                  capture_output=True, text=True, timeout=60).stdout.strip()
    trusted = tmp_path / "certs"
    trusted.mkdir()
    (trusted / f"{subject_hash}.0").write_bytes(cert.read_bytes())  # the layout `openssl rehash` writes
    monkeypatch.setenv("SSL_CERT_DIR", str(trusted))
    with FakeOpenAI(lambda n, b: (200, {}, completion(ANSWER)), tls=(str(cert), str(key))) as server:
        assert _ask(_direct_lm(server.api_base)).ranking == ["B", "A"]
    assert len(server.requests) == 1


def test_anthropic_gets_a_cache_breakpoint_at_the_end_of_the_case_and_openai_none():
    from tests.test_backend_faults import _body_for

    body, _ = _body_for("anthropic/claude-sonnet-4-5")
    (user,) = [m for m in body["messages"] if m["role"] == "user"]
    marked = [block for block in user["content"] if "cache_control" in block]
    assert len(marked) == 1 and marked[0]["cache_control"] == {"type": "ephemeral"}
    assert marked[0]["text"].startswith("[[ ## question ## ]]") and "[[ ## task ## ]]" not in marked[0]["text"]
    assert user["content"][-1]["text"].startswith("[[ ## task ## ]]")  # what differs per call comes after
    openai, _ = _body_for("openai/gpt-4o-mini", profile="openai")
    assert "cache_control" not in json.dumps(openai)


def test_the_shared_prefix_marker_handles_text_images_and_other_layouts():
    from teammed.prompt_cache import mark_shared_prefix

    plain = [{"role": "system", "content": "p"}, {"role": "user", "content": "no marker here"}]
    assert mark_shared_prefix(plain) == plain
    text = [{"role": "user", "content": "case\n[[ ## task ## ]]\nDo it."}]
    assert mark_shared_prefix(text)[0]["content"] == [
        {"type": "text", "text": "case\n", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "[[ ## task ## ]]\nDo it."}]
    bare = [{"role": "user", "content": "  [[ ## task ## ]]\nDo it."}]  # nothing before the task to share
    assert mark_shared_prefix(bare) == bare
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    mixed = [{"role": "user", "content": [{"type": "text", "text": "[[ ## question ## ]]\nq\n\n[[ ## image ## ]]\n"},
                                          image, {"type": "text", "text": "\n\n[[ ## task ## ]]\nDo it."}]}]
    out = mark_shared_prefix(mixed)[0]["content"]
    assert out[1] == {**image, "cache_control": {"type": "ephemeral"}}  # the case ends with its image
    assert out[2]["text"].startswith("[[ ## task ## ]]") and "cache_control" not in out[2]
    assert mixed[0]["content"][1] == image  # the input is left as it was


def test_the_prefix_every_call_shares_is_about_350_tokens_on_medqa_length_questions():
    """What Anthropic would need 1,024 tokens of to cache: the preamble and the case, measured on the
    MedQA-length vignettes of benchmarks/prefix_cache.py with litellm's bundled cl100k_base."""
    import importlib.util
    import os

    from litellm.litellm_core_utils import default_encoding

    from teammed.adapter import SchemaAdapter
    from teammed.signatures import InitialAssessment, Mediation

    spec = importlib.util.spec_from_file_location("prefix_cache", ROOT / "benchmarks" / "prefix_cache.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    adapter, encoding, sizes = SchemaAdapter(), default_encoding.encoding, []
    for vignette in module.VIGNETTES:
        texts = []
        for signature in (InitialAssessment, Mediation):
            inputs = {k: f"{k} text" for k in signature.input_fields}
            inputs.update(question=vignette["question"], options=vignette["options"])
            texts.append("".join(m["content"] for m in adapter.format(signature, [], inputs, compact=True)))
        sizes.append(len(encoding.encode(os.path.commonprefix(texts))))
    assert 300 <= sum(sizes) / len(sizes) <= 400 and max(sizes) < 1024, sizes


# ---------------------------------------------------------------- data.md
@pytest.mark.parametrize(("name", "registry_name"), [
    ("demo", "demo"), ("medqa", "medqa"), ("medqa_5options", "medqa_5options"), ("medmcqa", "medmcqa"),
    ("pubmedqa", "pubmedqa"), ("mmlu_pro_health", "mmlu_pro_health"), ("mmlu-pro", "mmlu_pro_health"),
    ("medbullets_op4", "medbullets_op4"), ("medbullets_op5", "medbullets_op5"), ("medbullets", "medbullets_op5"),
    ("mmlu", "mmlu"), ("afrimedqa", "afrimedqa"), ("medexqa", "medexqa"), ("medxpertqa_r", "medxpertqa_r"),
    ("medxpertqa_u", "medxpertqa_u"), ("ddxplus", "ddxplus"), ("pathvqa", "pathvqa"), ("pmc_vqa", "pmc_vqa"),
    ("clinical_notes", "clinical_notes"),
])
def test_every_documented_benchmark_name_is_a_registry_name(name, registry_name):
    from teammed.data.registry import _ALIASES, _key, available_datasets

    assert _ALIASES[_key(name)] == registry_name and registry_name in available_datasets()


def test_the_tune_part_is_30_percent_chosen_by_the_sha256_of_the_id():
    import hashlib

    from teammed.data import load_dataset
    from teammed.data.splits import part_of

    ids = [f"q{i}" for i in range(4000)]
    tune = [i for i in ids if part_of(i) == "tune"]
    assert 0.28 <= len(tune) / len(ids) <= 0.32
    by_hash = [i for i in ids if int.from_bytes(hashlib.sha256(f"teammed-split:{i}".encode()).digest()[:8], "big")
               / 2**64 < 0.3]
    assert tune == by_hash
    assert sum(part_of(q.id) == "tune" for q in load_dataset("demo")) == 6  # compile.md: 30% of the demo's 20


def test_search_compile_and_tune_read_a_medagentsbench_folder(tmp_path):
    from tests.helpers import write_medagentsbench

    data = write_medagentsbench(tmp_path / "mab", n_test=30, folders=("medqa",))
    realidx = {str(json.loads(line)["realidx"]) for line in (data / "medqa" / "test.jsonl").read_text().splitlines()}
    folder = ["--dataset", "medqa", "--data-dir", str(data), *SCRIPTED]
    assert main(["search", *folder, "--n", "2", "--trials", "1", "--sampler", "brute",
                 "--out", str(tmp_path / "sets")]) == 0
    (special,) = (tmp_path / "sets").glob("medqa-*.json")
    assert set(json.loads(special.read_text())["tuning"]["question_ids"]) <= realidx
    assert main(["compile", *folder, "--optimizer", "labeled", "--system", "zero_shot", "--train", "2", "--val", "1",
                 "--test", "1", "--out", str(tmp_path / "p.json")]) == 0
    meta = json.loads((tmp_path / "p.json").read_text())["teammed"]["meta"]
    assert set(meta["tuned_on"]["question_ids"]) <= realidx
    assert main(["tune", *folder, "--budget", "calls=1e6", "--optimizer", "none", "--n-eval", "2", "--batch-size",
                 "2", "--pool-size", "2", "--stage1-batches", "1", "--out", str(tmp_path / "tuned")]) == 0
    report = json.loads((tmp_path / "tuned" / "tune_report.json").read_text())
    assert set(report["tuning"]["question_ids"]) <= realidx


# ---------------------------------------------------------------- commands/*.md
def test_ask_runs_a_peer_system(capsys):
    assert main(["ask", "Most likely diagnosis?", "--option", "A=MI", "--option", "B=PE", "--system", "zero_shot",
                 *SCRIPTED]) == 0
    assert "Answer: " in capsys.readouterr().out


def test_compile_trains_on_the_demos_6_tuning_questions_and_reports_before_and_after(tmp_path, capsys):
    from teammed.data.splits import part_of

    program = tmp_path / "p.json"
    flags = ["compile", "--dataset", "demo", "--system", "cot", "--optimizer", "labeled", "--val", "1", "--test", "1",
             *SCRIPTED, "--out", str(program)]
    assert main([*flags, "--train", "5"]) == 2  # 5 + 1 + 1 = 7 of the demo's 6 tuning questions
    assert "needs 7 questions but only 6 are available" in capsys.readouterr().err and not program.exists()
    assert main([*flags, "--train", "4"]) == 0
    assert re.search(r"held-out accuracy \d+\.\d% -> \d+\.\d% \(1 questions\)", capsys.readouterr().out)
    meta = json.loads(program.read_text())["teammed"]["meta"]
    tuned = meta["tuned_on"]["question_ids"]  # train and val; the held-out test question is not tuned on
    assert len(tuned) == 5 and all(part_of(i) == "tune" for i in tuned)


def test_the_response_cache_is_size_bounded(tmp_path):
    from teammed.backends.cache import ResponseCache

    store = ResponseCache(tmp_path)._open()
    assert store.size_limit == 1 << 30 and store.eviction_policy == "least-recently-stored"


def test_without_out_a_run_goes_under_runs_time_dataset_label_seed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--dataset", "demo", "--n", "1", *SCRIPTED]) == 0
    (results,) = tmp_path.glob("runs/*/*/*/results.jsonl")
    assert re.fullmatch(r"runs/\d{8}-\d{6}-demo/base/seed111/results\.jsonl",
                        results.relative_to(tmp_path).as_posix())


def test_tuning_records_without_fingerprints_match_by_id_only_within_their_data_set(caplog):
    from teammed.experiments._data import TunedOn
    from teammed.types import Question

    sample = [Question(id=f"q{i}", question=f"Q{i}?", options={"A": "a", "B": "b"}) for i in range(3)]

    def overlap(dataset: str, sha256: str) -> tuple[list[str], str]:
        record = {"dataset": dataset, "dataset_sha256": sha256, "question_ids": ["q1"], "question_sha256": None}
        caplog.clear()
        found = TunedOn("special.json", (record,)).overlapping(sample, dataset="medqa", dataset_sha256="abc")
        return found, caplog.text

    assert overlap("medqa", "abc") == (["q1"], "")  # the same content: by id, silently
    found, warning = overlap("medqa", "other")  # the same name only: by id, with a warning
    assert found == ["q1"] and "matching them by id" in warning
    found, warning = overlap("medbullets", "other")  # another data set: ids alone never match
    assert found == [] and "none is left out" in warning


def test_compile_accepts_a_special_set(tmp_path):
    sets = tmp_path / "sets"
    assert main(["search", "--dataset", "demo", "--n", "2", "--trials", "1", "--sampler", "brute", *SCRIPTED,
                 "--out", str(sets)]) == 0
    (special,) = sets.glob("demo-*.json")
    document = json.loads(special.read_text())
    document["config"].update(leadership=True, trust=True, n_agents=2)  # not the default, so it shows
    special.write_text(json.dumps(document))
    program = tmp_path / "p.json"
    assert main(["compile", "--dataset", "demo", "--config", str(special), "--optimizer", "bootstrap", "--train", "2",
                 "--val", "1", "--test", "1", *SCRIPTED, "--out", str(program)]) == 0
    saved = json.loads(program.read_text())["teammed"]["config"]
    assert saved["leadership"] and saved["trust"] and saved["n_agents"] == 2


def test_the_special_set_is_the_most_accurate_completed_configuration_and_ties_go_to_fewer_tokens():
    from teammed.optimizers._evaluated import best_row

    def row(trial, accuracy, tokens, state="COMPLETE"):
        return {"trial": trial, "state": state, "accuracy": accuracy, "tokens_per_question": tokens}

    rows = [row(0, 0.7, 900), row(1, 0.8, 1200), row(2, 0.8, 1000), row(3, 0.9, 100, state="PRUNED")]
    assert best_row(rows)["trial"] == 2  # 0.9 was not evaluated to the end; 0.8 at fewer tokens wins the tie
    assert best_row([row(0, 0.8, 1000), row(1, 0.8, 1000)])["trial"] == 0
    assert best_row([row(0, 0.9, 100, state="PRUNED")]) is None


def test_the_presets_are_the_documented_table():
    from teammed.components import TABLE
    from teammed.config import PRESETS

    papers = {c.name for c in TABLE if c.papers}  # the papers' six; a component of one's own adds its own preset
    smm, lead, to, trust, mm, cl = ("shared_mental_model", "leadership", "team_orientation", "trust",
                                    "mutual_monitoring", "closed_loop")
    table = {"base": set(), "smm": {smm}, "leadership": {lead}, "team_orientation": {to, lead}, "trust": {trust},
             "mutual_monitoring": {mm, lead, trust}, "c7": {mm, lead, trust}, "closed_loop": {cl},
             "c6": {smm, lead, to}, "all": papers, "all5": papers - {cl}}
    assert {name: set(PRESETS[name].components) for name in table} == table
    assert len(papers) == 6 and all(config.n_turns == 2 for config in PRESETS.values())


def test_tune_draws_helpful_components_more_often_and_tries_all_of_them_together():
    from teammed.optimizers.tune import TuneSettings, on_probabilities, sample_pool

    influence = {"shared_mental_model": 0.06, "leadership": 0.03, "team_orientation": 0.0, "trust": -0.1,
                 "mutual_monitoring": 0.02, "closed_loop": -0.05}
    p_on = on_probabilities(influence)
    assert p_on["trust"] == 0.1 and p_on["team_orientation"] == 0.5
    assert p_on["trust"] < p_on["closed_loop"] < 0.5 < p_on["mutual_monitoring"] < p_on["leadership"] \
        < p_on["shared_mental_model"] <= 0.9
    pool = sample_pool(influence, settings=TuneSettings(dataset="d", model="m", pool_size=6))
    helpful = {"shared_mental_model", "leadership", "mutual_monitoring"}
    assert {c for c, on in pool[0].items() if on is True} == helpful and len(pool) == 6


def test_the_tune_report_lists_what_the_docs_say(tmp_path):
    out = tmp_path / "tuned"
    assert main(["tune", "--dataset", "demo", "--budget", "calls=1e6", *SCRIPTED, "--optimizer", "none", "--n-eval",
                 "2", "--batch-size", "2", "--pool-size", "2", "--stage1-batches", "1", "--out", str(out)]) == 0
    report = json.loads((out / "tune_report.json").read_text())
    assert report["tried"] and all({"calls", "tokens"} <= set(row) for row in report["tried"])
    assert set(report["influence"]) and "history" in report["racing"] and report["pareto_front"]
    assert {"calls", "reuse_rate"} <= set(report["spent"])
    assert (out / "tune_report.md").is_file() and (out / "demo.json").is_file()


@pytest.mark.parametrize("optimizer", ["none", "labeled", "bootstrap", "mipro", "gepa"])
def test_a_calls_plan_covers_none_labeled_and_bootstrap(optimizer):
    from teammed.errors import ConfigError
    from teammed.optimizers.tune import TuneSettings, make_plan
    from teammed.optimizers.tune_queue import Budget

    settings = TuneSettings(dataset="d", model="m", optimizer=optimizer)
    if optimizer in ("none", "labeled", "bootstrap"):
        assert make_plan(settings, Budget(calls=10**6), n_tune=60, n_eval=20).budget_calls == 10**6
    else:
        with pytest.raises(ConfigError, match="no call bound to plan with"):
            make_plan(settings, Budget(calls=10**6), n_tune=60, n_eval=20)


def test_the_tune_defaults_are_the_documented_ones():
    from teammed.optimizers.tune import TuneSettings

    settings = TuneSettings(dataset="d", model="m")
    assert (settings.optimizer, settings.seed, settings.batch_size, settings.stage1_batches, settings.pool_size,
            settings.alpha) == ("bootstrap", 111, 10, 3, 8, 0.05)


def test_reproduce_runs_50_questions_by_3_seeds_of_the_papers_rows_and_takes_no_revision(capsys):
    from teammed.cli import spec_of
    from teammed.optimizers.reproduce import DEFAULT_ROWS_001

    args = build_parser().parse_args(["reproduce", "001-table1"])
    assert (args.n, list(args.seeds)) == (None, [111, 222, 333])  # None: the protocol's own default
    assert spec_of(args).n is None  # and 001-table1's is 50 (ReproduceSettings: n=spec.n or 50)
    assert list(DEFAULT_ROWS_001) == ["Zero-Shot", "Few-Shot", "CoT", "Leadership", "Mut. Monitor.", "Shared Model",
                              "Team Orient.", "Mut. Trust", "All Compon.", "Closed Loop", "MDAgents",
                              "TeamMed (tuned)"]
    with pytest.raises(SystemExit) as refused:
        build_parser().parse_args(["reproduce", "001-table1", "--revision", "main"])
    assert refused.value.code == 2 and "--revision" in capsys.readouterr().err


def test_reproduce_says_not_in_paper_for_a_local_file(tmp_path, capsys):
    assert main(["reproduce", "001-table1", "--datasets", "demo", "--rows", "Zero-Shot", "--n", "2", "--seeds", "111",
                 *SCRIPTED, "--out", str(tmp_path / "r")]) == 0
    assert "not in paper" in (tmp_path / "r" / "table1.md").read_text()


def test_reproduce_reads_the_split_it_is_given(tmp_path, capsys):
    from tests.helpers import write_medagentsbench

    data = write_medagentsbench(tmp_path / "mab", n_test=24, folders=("medqa",))  # test_hard: the first 6
    sizes = {}
    for split in ("test", "test_hard"):
        assert main(["reproduce", "001-table1", "--data-dir", str(data), "--datasets", "MQA", "--rows", "Zero-Shot",
                     "--n", "50", "--seeds", "111", "--split", split, *SCRIPTED, "--out", str(tmp_path / split),
                     "--json"]) == 0
        (row,) = json.loads(capsys.readouterr().out)["rows"]
        sizes[split] = row["n_per_seed"][0]
    assert sizes["test_hard"] < 6 < sizes["test"]  # each split's held-out part, fewer than --n 50


def test_published_standard_errors_that_fit_as_standard_deviations():
    from teammed.evals.stats import published_consistency
    from teammed.optimizers.reproduce import TABLE1_001

    checks = [published_consistency(mean, se, n=50, k=3)
              for cells in TABLE1_001.values() for mean, se in cells.values()]
    assert len(checks) == 88
    sd_fits = [c for c in checks if c.mean_possible and not c.se_possible and c.sd_possible]
    assert len(sd_fits) == 12  # of the 38 SEs 3 x 50 questions cannot produce


def test_the_transcript_viewer_pages_hold_1000_question_ids():
    from teammed.evals.report import PAGE_QUESTIONS

    assert PAGE_QUESTIONS == 1000


def test_table_one_shows_the_majority_class_beside_the_configurations(tmp_path):
    run = tmp_path / "run"
    assert main(["run", "--dataset", "demo", "--n", "3", *SCRIPTED, "--out", str(run)]) == 0
    assert main(["report", str(run), "--out", str(tmp_path / "report")]) == 0
    table = (tmp_path / "report" / "report.md").read_text().split("## Table 1.")[1].split("\n## ")[0]
    assert re.search(r"^\| \*majority class\* \| \d+\.\d \|$", table, flags=re.M), table


# ---------------------------------------------------------------- results.md and the algorithm
def test_rows_are_schema_3_and_resume_compares_every_documented_identity_field():
    from teammed.records import SCHEMA_VERSION, RunIdentity, identity_differences

    assert SCHEMA_VERSION == 3
    base = RunIdentity(system="teamwork", label="base", config={"leadership": False}, program_sha256=None,
                       model="openai/a", deployments=["openai/a"], api_base="http://h/v1", dataset="demo",
                       dataset_sha256="0" * 64, split="test/eval", revision=None, n=3, seed=111,
                       question_ids=["q1"], teammed_version="0.1.0", temperature=0.0)
    changes = {"system": "cot", "label": "all", "config": {"leadership": True}, "program_sha256": "f" * 64,
               "model": "openai/b", "deployments": ["openai/b"], "api_base": "http://g/v1", "temperature": 0.7,
               "dataset": "medqa", "dataset_sha256": "1" * 64, "split": "test/tune", "revision": "v2", "n": 4,
               "seed": 222, "question_ids": ["q2"], "teammed_version": "0.2.0"}
    for name, value in changes.items():
        differences = identity_differences(base, base.model_copy(update={name: value}))
        assert len(differences) == 1 and differences[0].startswith(name), (name, differences)


def test_files_are_fsynced_before_the_rename(tmp_path, monkeypatch):
    import os

    from teammed import records

    events = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(records.os, "fsync", lambda fd: events.append("fsync") or real_fsync(fd))
    monkeypatch.setattr(records.os, "replace", lambda a, b: events.append("replace") or real_replace(a, b))
    records.write_atomic(tmp_path / "summary.json", "{}")
    assert events[:2] == ["fsync", "replace"] and (tmp_path / "summary.json").read_text() == "{}"


def test_a_later_turn_shows_only_what_was_said_since_the_speaker_last_spoke():
    from teammed.config import TeamworkConfig
    from teammed.programs.teamwork import TeamworkProgram
    from tests.helpers import run

    def responder(call):
        if call.signature == "DiscussionTurn":
            return {"message": f"turn-one words of {call.inputs['role']}"}
        return None

    _, _, lm = run(TeamworkProgram(TeamworkConfig(n_agents=3)), responder)
    finals = {c.inputs["role"]: c.inputs["history"] for c in lm.calls if c.signature == "FinalRanking"}
    second = finals["Medical Expert 2"]
    assert "(you)" in second and "turn-one words of Medical Expert 2" in second  # its own last message, marked
    assert "turn-one words of Medical Expert 3" in second  # said after it
    assert "turn-one words of Medical Expert 1" not in second  # said before it last spoke: not repeated


def test_closed_loop_sends_each_message_to_the_next_speaker_and_the_last_to_the_first():
    from teammed.config import TeamworkConfig
    from teammed.programs.teamwork import TeamworkProgram
    from tests.helpers import run

    out, _, _ = run(TeamworkProgram(TeamworkConfig(n_agents=3, closed_loop=True)))
    pairs = [(loop["sender"], loop["receiver"]) for loop in out.json_record["closed_loop"]]
    assert pairs == [("agent_1", "agent_2"), ("agent_2", "agent_3"), ("agent_3", "agent_1")]


# ---------------------------------------------------------------- architecture.md
def test_the_main_thread_waits_in_slices_of_a_fifth_of_a_second():
    from teammed import interrupts

    assert interrupts.SLICE_S == 0.2


# ---------------------------------------------------------------- decisions.md
def test_team_orientation_alone_keeps_generic_roles_and_equal_weights():
    from teammed.config import TeamworkConfig
    from teammed.programs.teamwork import TeamworkProgram
    from tests.helpers import run

    out, _, lm = run(TeamworkProgram(TeamworkConfig(n_agents=3, team_orientation=True)))
    record = out.json_record
    assert [a["role"] for a in record["agents"]] == ["Medical Expert 1", "Medical Expert 2", "Medical Expert 3"]
    assert [a["weight"] for a in record["agents"]] == pytest.approx([1 / 3] * 3)
    assert record["aggregation"] == "hierarchical_borda" and not record["report"]  # over equal weights
    signatures = {c.signature for c in lm.calls}
    assert "SpecialtyRecruitment" not in signatures and "FormalReport" not in signatures
    # the role briefs (spec phase 2: RoleInstructions when TO is on) still reach the agents
    assert all("; focus: general clinical reasoning" in str(c.inputs["role"])
               for c in lm.calls if c.signature == "InitialAssessment")


def test_the_leader_does_not_vote():
    from teammed.config import preset
    from teammed.programs.teamwork import TeamworkProgram
    from tests.helpers import run

    out, _, _ = run(TeamworkProgram(preset("leadership", n_agents=3)))  # the scripted team agrees on A
    assert out.json_record["scores"]["A"] == 3 * (4 - 1)  # three voters, 3 points each: no 1.5x for anyone


@pytest.mark.parametrize(("facts", "justification", "confidence", "quality"), [
    (2, "x" * 40, "Medium", 1.0), (5, "x" * 40, "High", 1.0),
    (1, "x" * 40, "High", 0.75), (6, "x" * 40, "High", 0.75), (3, "x" * 39, "High", 0.75), (3, "x" * 40, "Low", 0.75),
])
def test_the_four_equal_checks_without_a_leader(facts, justification, confidence, quality):
    from teammed.programs.trust import automated_quality

    assert automated_quality(ranking_repaired=False, n_facts=facts, justification=justification,
                             confidence=confidence) == quality
    assert automated_quality(ranking_repaired=True, n_facts=facts, justification=justification,
                             confidence=confidence) == quality - 0.25


# ---------------------------------------------------------------- python-api.md
def test_the_python_api_page_lists_what_teammed_programs_exports():
    import teammed.programs

    page = (ROOT / "docs" / "python-api.md").read_text()
    listed = page.split("`teammed.programs` exports:", 1)[1].split("Options are validated", 1)[0]
    names = set(re.findall(r"`([A-Za-z_]+)`", listed)) - {"DeprecationWarning"}
    assert names, listed
    assert names <= set(teammed.programs.__all__) | {"ChainOfThought"}, names - set(teammed.programs.__all__)
