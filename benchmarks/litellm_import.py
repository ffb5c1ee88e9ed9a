"""What ``LITELLM_LOCAL_MODEL_COST_MAP=True`` (set by the ``teammed`` command only) is worth: the wall
time of ``import litellm`` and where its price map came from, with the variable and without it, on
this machine as it is (no internet) and behind a network that swallows packets (a proxy that
accepts connections and never answers, as a firewall that drops them looks to a client).

    python benchmarks/litellm_import.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time

CODE = ("import time; t = time.perf_counter(); import litellm; wall = time.perf_counter() - t\n"
        "from litellm.litellm_core_utils import get_model_cost_map as g\n"
        "import json; print(json.dumps({'wall_s': wall, 'source': g.get_model_cost_map_source_info()['source'],"
        " 'models': len(litellm.model_cost)}))")


def swallowing_proxy() -> tuple[str, socket.socket]:
    """A listening socket that accepts connections and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                held.append(server.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    return f"http://127.0.0.1:{server.getsockname()[1]}", server


def one(env: dict[str, str]) -> dict[str, object]:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", CODE], env=env, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise SystemExit(done.stderr[-2000:])
    found: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    found["process_s"] = time.perf_counter() - started
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    base = {k: v for k, v in os.environ.items() if k != "LITELLM_LOCAL_MODEL_COST_MAP"}
    proxy, server = swallowing_proxy()
    arms = {
        "variable set": {**base, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
        "unset, this machine's network": base,
        "unset, packets swallowed": {**base, "HTTPS_PROXY": proxy, "https_proxy": proxy},
    }
    results = {}
    for _ in range(args.rounds):  # interleaved, so a load on the machine falls on every arm
        for name, env in arms.items():
            results.setdefault(name, []).append(one(env))
    server.close()
    for name, runs in results.items():
        walls = [float(r["wall_s"]) for r in runs]  # type: ignore[arg-type]
        print(f"{name:32s} import litellm: median {statistics.median(walls):5.2f} s (max {max(walls):5.2f}); "
              f"price map: {sorted({str(r['source']) for r in runs})}, {runs[0]['models']} models")
    return 0


if __name__ == "__main__":
    sys.exit(main())
