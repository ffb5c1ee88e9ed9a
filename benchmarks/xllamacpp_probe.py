"""A first look at xllamacpp (llama.cpp's own server as prebuilt Python bindings) on the embedded GGUF (issue 48).

    python -m venv /tmp/xl && /tmp/xl/bin/pip install xllamacpp && /tmp/xl/bin/python benchmarks/xllamacpp_probe.py GGUF

Starts the server in process, sends three chat requests with the JSON-schema ``response_format`` teammed sends
llama.cpp, and prints the start-up time, each request's time, the answer and the usage. Not a test, and not a
side-by-side measurement against llama-cpp-python.
"""

import json
import sys
import time
import urllib.request

import xllamacpp

PORT = 18777
SCHEMA = {"type": "object", "required": ["answer", "confidence"],
          "properties": {"answer": {"type": "string", "enum": ["A", "B", "C"]},
                         "confidence": {"type": "string", "enum": ["High", "Low"]}}}
QUESTION = ("A 58-year-old man has crushing chest pain radiating to the left arm. A: myocardial infarction, "
            "B: pulmonary embolism, C: aortic dissection. Answer as JSON.")


def main() -> None:
    started = time.monotonic()
    params = xllamacpp.CommonParams()
    params.model.path = sys.argv[1]
    params.n_ctx, params.n_parallel, params.port = 4096, 1, PORT
    params.hostnames = ["127.0.0.1"]
    params.cpuparams.n_threads = 2
    server = xllamacpp.Server(params)
    print("listening", server.listening_address, "start-up", round(time.monotonic() - started, 2), "s", flush=True)
    body = {"model": "m", "messages": [{"role": "user", "content": QUESTION}], "max_tokens": 64, "temperature": 0,
            "response_format": {"type": "json_object", "schema": SCHEMA}}
    for _ in range(3):
        sent = time.monotonic()
        request = urllib.request.Request(f"http://127.0.0.1:{PORT}/v1/chat/completions",
                                         data=json.dumps(body).encode(), headers={"content-type": "application/json"})
        answer = json.loads(urllib.request.urlopen(request, timeout=60).read())
        print(round(time.monotonic() - sent, 2), "s", answer["choices"][0]["message"]["content"].replace("\n", " "),
              answer.get("usage"), flush=True)


if __name__ == "__main__":
    main()
