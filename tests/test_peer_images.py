"""Images reach every peer system on a vision backend; a text-only backend is refused up front."""

from __future__ import annotations

import base64
import json

import dspy
import pytest

from teammed import usage
from teammed.cli import main
from teammed.programs import SYSTEMS, build_system
from tests.fake_openai import FakeOpenAI, completion
from tests.schema_fake import respond

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")
OPTIONS = {"A": "Adenocarcinoma", "B": "Squamous cell carcinoma", "C": "Normal tissue"}


def _image_parts(request: dict) -> list[str]:
    parts = []
    for message in request.get("messages", []):
        content = message.get("content")
        if isinstance(content, list):
            parts += [p["image_url"]["url"] for p in content if isinstance(p, dict) and p.get("type") == "image_url"]
    return parts


class VisionServer:
    """A fake vision model: it answers the ``Key`` only when the image arrived as an image_url part."""

    def __init__(self):
        self.saw_image: list[bool] = []

    def __call__(self, n: int, request: dict):
        images = _image_parts(request)
        seen = bool(images) and all(url.startswith("data:image/png;base64,") for url in images)
        self.saw_image.append(seen)
        text = respond(request) if seen else respond({**request, "messages": []})  # blind: no key, answers A
        return 200, {}, completion(text)


@pytest.fixture
def slide(tmp_path):
    path = tmp_path / "slide.png"
    path.write_bytes(PNG)
    return path


@pytest.mark.parametrize("system", sorted(SYSTEMS))
def test_every_peer_system_shows_the_image_to_the_model(system, slide):
    server_logic = VisionServer()
    with FakeOpenAI(server_logic) as server:
        lm = dspy.LM("openai/fake-vision", api_base=server.api_base, api_key="x", cache=False)
        with dspy.context(lm=lm), usage.track() as used:
            prediction = build_system(system)(question="What does the slide show? Key: B", options=OPTIONS,
                                              image=str(slide))
    assert prediction.answer == "B"
    assert used.calls == len(server_logic.saw_image) > 0
    assert all(server_logic.saw_image), f"{system}: {server_logic.saw_image}"


def test_without_an_image_no_image_part_is_sent(slide):
    server_logic = VisionServer()
    with FakeOpenAI(server_logic) as server:
        lm = dspy.LM("openai/fake-vision", api_base=server.api_base, api_key="x", cache=False)
        with dspy.context(lm=lm):
            prediction = build_system("cot")(question="What does the slide show? Key: B", options=OPTIONS)
    assert prediction.answer == "A" and server_logic.saw_image == [False]


def _dataset(tmp_path, slide):
    data = tmp_path / "vqa.jsonl"
    rows = [{"id": f"q{i}", "question": f"What does slide {i} show? Key: C", "options": OPTIONS,
             "answer_idx": "C", "image": str(slide)} for i in range(2)]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return data


@pytest.mark.parametrize("system", ["zero_shot", "mdagents", "teamwork"])
def test_run_answers_image_questions_on_a_vision_backend(tmp_path, slide, monkeypatch, system):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake")
    server_logic = VisionServer()
    out = tmp_path / "run"
    with FakeOpenAI(server_logic) as server:
        code = main(["run", "--dataset", str(_dataset(tmp_path, slide)), "--split", "all", "--system", system,
                     "--model",
                     "openai/gpt-4o", "--api-base", server.api_base, "--no-cache", "--out", str(out),
                     "--n-agents" if system == "teamwork" else "--seed", "2" if system == "teamwork" else "111"])
    assert code == 0
    rows = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert not any(r["failed"] for r in rows), [r["error"] for r in rows]
    if system == "teamwork":  # teamwork shows the image in round 2 only: 2 clinicians x 2 questions
        assert sum(server_logic.saw_image) == 4
    else:
        assert all(server_logic.saw_image) and [r["correct"] for r in rows] == [True, True]


@pytest.mark.parametrize("system", ["cot", "consultation", "teamwork"])
def test_a_text_only_backend_is_refused_before_any_call(tmp_path, slide, capsys, system):
    out = tmp_path / "run"
    code = main(["run", "--dataset", str(_dataset(tmp_path, slide)), "--split", "all", "--system", system,
                 "--model", "scripted",
                 "--out", str(out)])
    assert code == 2
    assert "text-only model" in capsys.readouterr().err
    assert not (out / "results.jsonl").exists()


def test_teamwork_without_vision_refuses_an_image_before_any_call(slide):
    from teammed.errors import ConfigError
    from teammed.programs import TeamworkProgram

    server_logic = VisionServer()
    with FakeOpenAI(server_logic) as server:
        lm = dspy.LM("openai/fake-vision", api_base=server.api_base, api_key="x", cache=False)
        with dspy.context(lm=lm), pytest.raises(ConfigError, match="vision=True"):
            TeamworkProgram()(question="Key: A", options=OPTIONS, image=str(slide))
    assert server_logic.saw_image == []


@pytest.mark.parametrize("system", ["teamwork", "zero_shot", "kamac"])
def test_ask_shows_an_image_to_a_vision_model(slide, monkeypatch, capsys, system):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake")
    server_logic = VisionServer()
    with FakeOpenAI(server_logic) as server:
        code = main(["ask", "What does the slide show? Key: B", "--option", f"A={OPTIONS['A']}",
                     "--option", f"B={OPTIONS['B']}", "--option", f"C={OPTIONS['C']}", "--image", str(slide),
                     "--system", system, "--model", "openai/gpt-4o", "--api-base", server.api_base, "--no-cache",
                     *(["--n-agents", "2"] if system == "teamwork" else [])])
    assert code == 0, capsys.readouterr().err
    if system == "teamwork":  # the image goes to each clinician in round 2 (two of them here)
        assert sum(server_logic.saw_image) == 2 and "Answer: " in capsys.readouterr().out
    else:
        assert all(server_logic.saw_image) and "Answer: B)" in capsys.readouterr().out


@pytest.mark.parametrize("image, message", [("{tmp}/missing.png", "no such file"), (None, "text-only model")])
def test_ask_image_errors_are_one_line_before_any_call(tmp_path, slide, capsys, image, message):
    path = image.replace("{tmp}", str(tmp_path)) if image else str(slide)
    code = main(["ask", "What does the slide show?", "--option", "A=x", "--option", "B=y", "--image", path,
                 "--model", "scripted"])
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err
