"""`make run`'s web server (deltaweb/devserver.py, started by scripts/run.sh) answers requests on
a kept-alive connection without Nagle's 40 ms stall. Django's own runserver sends a response's
headers and body in two sends; the body waited for the client's delayed ACK, so every request
on a kept connection took at least ~40 ms, and a Delta Sharing recipient (about ten requests
per file) waited ~0.5 s per file (issue 57, item 9; benchmarks/sharing_files.py measures the
connector). The fastest of 40 requests shows it whatever the machine's load."""

from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import sys
import time

from tests.conftest import REPO


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fastest_of_kept_alive_requests(module_args: list[str], tmp_path, n: int = 40) -> float:
    """Seconds of the fastest of `n` GET /healthz on one kept-alive connection to the server."""
    port = _free_port()
    env = {
        **os.environ,
        "DELTAWEB_DEBUG": "1",  # as scripts/run.sh
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "DELTAWEB_STATIC_FINDERS": "1",
    }
    command = [sys.executable, *module_args, f"127.0.0.1:{port}", "--noreload", "--nostatic"]
    server = subprocess.Popen(
        command, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                conn.request("GET", "/healthz")
                assert conn.getresponse().read() == b"ok\n"
                break
            except OSError:
                assert time.monotonic() < deadline and server.poll() is None, "the server did not start"
                time.sleep(0.2)
        times = []
        for _ in range(n):
            start = time.perf_counter()
            conn.request("GET", "/healthz")
            answer = conn.getresponse()
            assert answer.read() == b"ok\n" and answer.getheader("Connection") != "close"
            times.append(time.perf_counter() - start)
        return min(times)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


def test_make_runs_server_answers_kept_alive_requests_without_a_delayed_ack_stall(tmp_path) -> None:
    assert "-m deltaweb.devserver" in (REPO / "scripts" / "run.sh").read_text()  # what make run starts
    fastest = fastest_of_kept_alive_requests(["-m", "deltaweb.devserver"], tmp_path)
    assert fastest < 0.02, f"{fastest * 1000:.1f} ms: the body waited for the client's ACK"
