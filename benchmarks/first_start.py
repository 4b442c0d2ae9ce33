"""`make run` on a fresh clone: seconds until the first page answers, and each step's share.

Usage: .venv/bin/python benchmarks/first_start.py [--source /work/main] [--dest /tmp/fresh] [--port 8765]
       [--redis-port 6391] [--ref HEAD]

Clones --source (its committed --ref) into --dest (removed first), runs `make run` there in a
session of its own with a private web and Redis port, prints each line of its output with the
seconds since the start, polls the sign-in page every half second, and stops the whole session
once that page answers 200 (or after --timeout). pip's own cache (~/.cache/pip) is what it is:
warm on a machine that installed the project before. Prints one JSON line last: the seconds to
the first page and to each `[n/m]` step.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import threading
import time
import urllib.request


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", default="/work/main")
    parser.add_argument("--dest", default="/tmp/fresh")
    parser.add_argument("--ref", default="HEAD")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--redis-port", type=int, default=6391)
    parser.add_argument("--timeout", type=float, default=600)
    args = parser.parse_args()
    shutil.rmtree(args.dest, ignore_errors=True)
    subprocess.run(["git", "clone", "-q", args.source, args.dest], check=True)
    subprocess.run(["git", "-C", args.dest, "checkout", "-q", args.ref], check=True)
    load = os.getloadavg()
    start = time.monotonic()
    steps: dict[str, float] = {}
    make = subprocess.Popen(
        ["make", "run", f"PORT={args.port}", f"REDIS_PORT={args.redis_port}"],
        cwd=args.dest,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        env={k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"},
    )

    def echo() -> None:
        assert make.stdout is not None
        for line in make.stdout:
            at = time.monotonic() - start
            print(f"{at:6.1f}s  {line.rstrip()}", flush=True)
            if line.startswith("["):
                steps.setdefault(line.split("]")[0] + "]", round(at, 1))

    threading.Thread(target=echo, daemon=True).start()
    first = None
    try:
        while time.monotonic() - start < args.timeout and make.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{args.port}/accounts/login/", timeout=5) as answer:
                    if answer.status == 200:
                        first = time.monotonic() - start
                        break
            except OSError:
                pass
            time.sleep(0.5)
    finally:
        os.killpg(make.pid, signal.SIGINT)  # run.sh's trap stops redis, the workers, Spark
        try:
            make.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(make.pid, signal.SIGKILL)
    result = {"first_page_s": None if first is None else round(first, 1), "steps": steps}
    result.update(loadavg_before=list(load), loadavg=list(os.getloadavg()), ref=args.ref)
    print(json.dumps(result), flush=True)
    return 0 if first is not None else 1


if __name__ == "__main__":
    raise SystemExit(main())
