"""The compose stack as a platform team deploys it: docker-compose.yml run with podman (with
deploy/compose.stand-ins.yml where docker.io and quay.io cannot be reached: Debian's Redis and
PostgreSQL, moto's S3 and SQS in MinIO's place), every service from the file, and driven from
outside through the one published port, as a user and an integration would: the example S3
table registered and synced, a preview and a keyed row diff through the Spark Connect server
on the Spark cluster, a restore requested, approved and committed, a commit pushed through the
bucket's event notifications, /metrics read by prometheus-client's parser, /readyz while Redis
is down and back, and a worker container killed in the middle of a job."""

from __future__ import annotations

import json
import resource
import secrets
import subprocess
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

from tests.conftest import REPO
from tests.deploy.conftest import build_image
from tests.deploy.stack import Stack

APP_SERVICES = ("web", "worker", "beat", "events", "seed")
TABLE = "s3://deltaweb/examples/sales"
# what the test changes of the file: quick sweeps of lost jobs, so a killed worker's job ends
# within seconds rather than minutes (the settings a deployment may set too)
QUICK = {
    "DELTAWEB_JOB_SILENT_MINUTES": "0.25",
    "DELTAWEB_JOB_HEARTBEAT_SECONDS": "3",
    "DELTAWEB_JOB_SWEEP_SECONDS": "5",
}


@pytest.fixture(scope="module")
def stack(tmp_path_factory) -> Any:
    tables = tmp_path_factory.mktemp("stack-tables")
    tables.chmod(0o777)  # the containers' user (uid 10001) writes restores there
    env = {
        "POSTGRES_PASSWORD": secrets.token_hex(12),
        "DELTAWEB_SECRET_KEY": secrets.token_hex(32),
        "MINIO_ROOT_USER": "stack-test",
        "MINIO_ROOT_PASSWORD": secrets.token_hex(12),
        "DELTAWEB_SPARK_CONNECT_TOKEN": secrets.token_hex(16),
        "SPARK_AUTH_SECRET": secrets.token_hex(16),
        "DELTAWEB_ALLOWED_HOSTS": "127.0.0.1,localhost",
        "DELTAWEB_METRICS_TOKEN": secrets.token_hex(16),
        "DELTAWEB_TABLES_DIR": str(tables),
    }
    quick = {"services": {s: {"environment": QUICK} for s in APP_SERVICES}}
    files = [REPO / "docker-compose.yml", REPO / "deploy" / "compose.stand-ins.yml"]
    up = Stack(f"dwstack{secrets.token_hex(3)}", REPO, files, env, extra=[quick])
    up.build(build_image)
    try:
        started = time.monotonic()
        up.up()
        up.wait_healthy("web")
        up.ready_after = time.monotonic() - started
        (REPO / "var" / "stack-timings.json").write_text(json.dumps({"ready": up.ready_after, **up.timings}))
        up.base = f"http://127.0.0.1:{up.port('web', 8000)}"
        yield up
    finally:
        logs = REPO / "var" / "stack-logs"  # what each service printed, for a failure's reader
        logs.mkdir(parents=True, exist_ok=True)
        for service in up.services:
            (logs / f"{service}.log").write_text(up.logs(service))
        up.down()


class Client:
    """The REST API as an integration calls it, with a user's token."""

    def __init__(self, base: str, token: str | None = None) -> None:
        self.base, self.token = base, token

    def call(self, method: str, path: str, body: dict | None = None, timeout: float = 60) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.base + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        if self.token:
            request.add_header("Authorization", f"Token {self.token}")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as answer:
                raw = answer.read()
                status = answer.status
        except urllib.error.HTTPError as refused:
            raw, status = refused.read(), refused.code
        try:
            return status, json.loads(raw) if raw else None
        except ValueError:
            return status, raw.decode(errors="replace")

    def until(self, path: str, done, seconds: float = 300) -> Any:
        """GET `path` until `done(body)`; the last body."""
        deadline = time.monotonic() + seconds
        while True:
            status, body = self.call("GET", path)
            if status == 200 and done(body):
                return body
            assert time.monotonic() < deadline, f"{path} after {seconds:.0f} s: {status} {body}"
            time.sleep(1)

    def job(self, job_id: int, seconds: float = 300) -> dict:
        return self.until(f"/api/jobs/{job_id}/", lambda j: j["isTerminal"], seconds)


USERS = """
from django.contrib.auth.models import Group, User
for name, group in (("ana", "analyst"), ("abe", "approver")):
    user = User.objects.filter(username=name).first() or User.objects.create_user(name, password="{password}")
    user.groups.add(Group.objects.get_or_create(name=group)[0])
"""


@pytest.fixture(scope="module")
def password() -> str:
    """The stack's users' password (the browser signs in with it)."""
    return secrets.token_hex(8)


@pytest.fixture(scope="module")
def users(stack, password) -> dict[str, Client]:
    made = stack.exec("web", "python", "manage.py", "shell", "-c", USERS.replace("{password}", password))
    assert made.returncode == 0, made.stderr[-2000:]
    clients = {}
    for name in ("ana", "abe"):
        status, body = Client(stack.base).call("POST", "/api/auth/token/", {"username": name, "password": password})
        assert status == 200, body
        clients[name] = Client(stack.base, body["token"])
    return clients


@pytest.fixture(scope="module")
def sales(stack, users) -> dict:
    """The example table (the seed service wrote it to the bucket), registered and synced."""
    ana = users["ana"]
    status, table = ana.call("POST", "/api/tables/", {"name": "sales", "location": TABLE})
    assert status == 201, table
    assert ana.job(table["syncJob"]["id"])["status"] == "succeeded"
    return ana.until(f"/api/tables/{table['id']}/", lambda t: t["lastSyncedVersion"] is not None)


def test_the_example_table_is_registered_and_synced_from_the_bucket(stack, sales, users) -> None:
    assert sales["lastSyncedVersion"] == 2 and sales["syncState"] == "ok"
    status, history = users["ana"].call("GET", f"/api/tables/{sales['id']}/history/")
    assert status == 200
    assert [c["version"] for c in history["results"]] == [2, 1, 0]


def test_only_the_web_port_is_published(stack) -> None:
    for service in stack.services:
        if service in ("seed", "minio-setup", "spark-tls"):  # one-shots, done
            continue
        shown = stack.exec(service, "true")
        assert shown.returncode == 0, f"{service} is not running: {stack.logs(service)[-2000:]}"
    published = {s for s in stack.services if stack.services[s].get("ports")}
    assert published == {"web"}


def test_every_healthcheck_passes_as_podman_runs_it_and_the_limits_hold(stack) -> None:
    """Each long-running service's healthcheck, stored by podman from the file's own test and run
    by podman (`podman healthcheck run`), passes; each container runs with the file's ulimits."""
    machine = {
        "nofile": resource.getrlimit(resource.RLIMIT_NOFILE)[1],
        "nproc": resource.getrlimit(resource.RLIMIT_NPROC)[1],
    }
    rows = {"nofile": "Max open files", "nproc": "Max processes"}
    for service, spec in stack.services.items():
        if service in ("seed", "minio-setup", "spark-tls"):  # one-shots, done
            continue
        check = spec.get("healthcheck")
        if check and not check.get("disable"):
            stored = subprocess.run(
                ["podman", "inspect", "-f", "{{json .Config.Healthcheck.Test}}", stack.name(service)],
                capture_output=True,
                text=True,
            )
            assert json.loads(stored.stdout) == [str(t) for t in check["test"]], service
            ran = stack.healthcheck(service)
            assert ran.returncode == 0, f"{service}: {ran.stdout}{ran.stderr}"
        limits = stack.exec(service, "cat", "/proc/self/limits").stdout
        for kind, value in spec["ulimits"].items():
            soft, hard = (value["soft"], value["hard"]) if isinstance(value, dict) else (value, value)
            shown = next(line for line in limits.splitlines() if line.startswith(rows[kind])).split()[-3:-1]
            assert shown == [str(soft), str(hard)], (service, kind, shown)
            assert hard <= machine[kind]


def data_job(client: Client, method: str, path: str, body: dict | None = None) -> dict:
    """Start a data job and wait for it; the job, finished."""
    status, job = client.call(method, path, body)
    assert status in (200, 202), job
    return client.job(job["id"])


def test_a_preview_and_a_keyed_diff_run_on_the_cluster_through_the_connect_server(stack, sales, users) -> None:
    ana, table = users["ana"], sales["id"]
    totals = {}
    for version in (1, 2):
        job = data_job(ana, "POST", f"/api/tables/{table}/versions/{version}/rows/")
        assert job["status"] == "succeeded", job
        page = ana.until(f"/api/tables/{table}/versions/{version}/rows/?offset=0&limit=10", lambda p: "rows" in p)
        assert "id" in [c["name"] for c in page["columns"]] and len(page["rows"]) == min(10, page["total"])
        totals[version] = page["total"]
    diff = data_job(ana, "POST", f"/api/tables/{table}/diff/rows/?from=1&to=2&keys=id")
    assert diff["status"] == "succeeded", diff
    status, rows = ana.call("GET", f"/api/jobs/{diff['id']}/results/?offset=0&limit=5")
    assert status == 200
    # version 2 deletes rows and adds none: the diff's removals are the two versions' difference
    assert rows["counts"] == {"added": 0, "removed": totals[1] - totals[2], "changed": 0} and totals[1] > totals[2]
    # the jobs ran on the cluster's executors (the Connect server's application on the master)
    assert "deltaweb-connect" in stack.logs("spark-master")


def test_a_restore_is_requested_approved_and_committed_on_the_bucket(stack, sales, users) -> None:
    ana, abe, table = users["ana"], users["abe"], sales["id"]
    status, request = ana.call("POST", f"/api/tables/{table}/restores/", {"version": 1, "reason": "stack test"})
    assert status == 201, request
    assert ana.call("POST", f"/api/restores/{request['id']}/approve/", {"comment": "mine"})[0] == 403
    status, approved = abe.call("POST", f"/api/restores/{request['id']}/approve/", {"comment": "ok"})
    assert status in (200, 202), approved
    done = abe.until(f"/api/restores/{request['id']}/", lambda r: r["status"] in ("succeeded", "failed"), 600)
    assert done["status"] == "succeeded", done
    synced = ana.until(f"/api/tables/{table}/", lambda t: (t["lastSyncedVersion"] or 0) >= 3)
    status, history = ana.call("GET", f"/api/tables/{table}/history/?version_min=3&version_max=3")
    assert history["results"][0]["operation"] == "RESTORE" and synced["syncState"] == "ok"


PUSHED = """
import json, os, time, boto3
s3 = boto3.client("s3")
log = "examples/sales/_delta_log/"
last = max(int(o["Key"][len(log):][:20]) for o in s3.list_objects_v2(Bucket="deltaweb", Prefix=log)["Contents"]
           if o["Key"].endswith(".json"))
commit = {"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "SET TBLPROPERTIES",
          "operationParameters": {"properties": "{}"}, "isBlindAppend": True}}
s3.put_object(Bucket="deltaweb", Key=f"{log}{last + 1:020d}.json", Body=json.dumps(commit).encode(),
              IfNoneMatch="*")
print(last + 1)
"""


def metrics(stack) -> dict[str, Any]:
    """/metrics as a scraper on the network reads it (the deployment's bearer token)."""
    from prometheus_client.parser import text_string_to_metric_families

    token = stack.services["web"]["environment"]["DELTAWEB_METRICS_TOKEN"]
    request = urllib.request.Request(stack.base + "/metrics", headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return {f.name: f for f in text_string_to_metric_families(answer.read().decode())}


def sample(families: dict, name: str, **labels: str) -> float:
    found = [
        s.value for f in families.values() for s in f.samples if s.name == name and labels.items() <= s.labels.items()
    ]
    return sum(found)


def test_a_commit_on_the_bucket_is_pushed_through_its_event_notifications(stack, sales, users) -> None:
    """The bucket notifies the queue (moto's SQS), the events service syncs the table: the new
    version is there without a sync asked and long before the table's own probe is due."""
    ana, table = users["ana"], sales["id"]
    before = ana.until(f"/api/tables/{table}/", lambda t: t["syncState"] == "ok")
    wrote = stack.run("seed", "python", "-c", PUSHED)
    assert wrote.returncode == 0, wrote.stderr[-2000:]
    version = int(wrote.stdout.strip().splitlines()[-1])
    assert version > before["lastSyncedVersion"]
    after = ana.until(f"/api/tables/{table}/", lambda t: t["lastSyncedVersion"] == version, 120)
    assert after["lastSyncedVersion"] == version
    assert sample(metrics(stack), "deltaweb_events_messages_total", outcome="handled") >= 1


def test_metrics_parse_and_count_the_stacks_jobs(stack, sales, users) -> None:
    families = metrics(stack)
    assert sample(families, "deltaweb_sync_seconds_count") >= 1
    assert sample(families, "deltaweb_spark_job_seconds_count", kind="preview") >= 2
    assert sample(families, "deltaweb_tables") == 1  # in whichever state (a push may be syncing it)
    assert sample(families, "process_resident_memory_bytes") > 0
    # the compose file's one worker, as a ping answered within half a second counts it: a
    # scrape while the machine is busy may miss its answer, the next one hears it
    deadline = time.monotonic() + 60
    while sample(families, "deltaweb_workers_alive") != 1 and time.monotonic() < deadline:
        time.sleep(2)
        families = metrics(stack)
    assert sample(families, "deltaweb_workers_alive") == 1
    assert "deltaweb_task_queue_messages" in families and "deltaweb_beat_last_tick_timestamp_seconds" in families


def ready(stack) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(stack.base + "/readyz", timeout=5) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as down:
        return down.code, json.loads(down.read())


def until_ready(stack, seconds: float = 120) -> None:
    Client(stack.base).until("/readyz", lambda body: True, seconds)  # a 200 is ready


def test_readyz_names_redis_while_it_is_down_and_is_ready_when_it_is_back(stack, sales) -> None:
    until_ready(stack)
    stack.stop("redis")
    try:
        status, body = ready(stack)
        assert status == 503 and "broker" in body["down"]
    finally:
        stack.start("redis")
    stack.wait_healthy("redis")
    until_ready(stack)


def test_57_11_a_user_signs_in_on_the_stack_and_sees_the_tables_history_and_its_health(
    stack, sales, users, password
) -> None:
    """Issue 57, item 11, in a real browser (Debian's Chromium) under the app's own CSP, on the
    stack's one published port: sign in with the form, the tables list shows the bucket's table
    in sync at its latest version, its History lists every version the API has with its
    operation, and no "Background work is paused" banner; /healthz and /readyz answer as a load
    balancer and an operator read them. Screenshots: test-output/screenshots/57-11-stack.png (the
    History), 57-11-stack-tables.png (the list)."""
    pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
    from playwright.sync_api import expect, sync_playwright

    from tests.e2e import csp
    from tests.e2e.test_browser import ARGS, CHROMIUM, SHOTS

    if not CHROMIUM.exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (install Debian's chromium package)")
    ana, table = users["ana"], sales["id"]
    synced = ana.until(f"/api/tables/{table}/", lambda t: t["syncState"] == "ok")
    status, history = ana.call("GET", f"/api/tables/{table}/history/?limit=200")
    assert status == 200 and history["results"], history
    operations = {c["version"]: c["operation"] for c in history["results"]}
    assert max(operations) == synced["lastSyncedVersion"] and {0, 1, 2} <= operations.keys()
    SHOTS.mkdir(parents=True, exist_ok=True)
    errors: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        context = csp.new_context(browser, sink=errors, viewport={"width": 1366, "height": 900})
        page = context.new_page()
        page.set_default_timeout(60_000)  # a loaded machine: the stack shares its 2 cores
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        try:
            page.goto(stack.base + "/accounts/login/")
            page.get_by_label("Username").fill("ana")
            page.get_by_label("Password").fill(password)
            page.get_by_role("button", name="Sign in").click()
            expect(page.get_by_role("heading", name="Tables")).to_be_visible()
            # the tables list: the bucket's table, in sync, at the version the log ends at
            row = page.locator("table.fleet tbody tr", has=page.get_by_role("link", name="sales", exact=True))
            expect(row).to_have_count(1)
            expect(row).to_contain_text(TABLE)
            expect(row.locator("[data-sync-badge]")).to_have_text("in sync")
            expect(row).to_contain_text(f"version {synced['lastSyncedVersion']}")
            expect(row).to_contain_text("checked")
            expect(page.locator(".banner-paused")).to_have_count(0)
            page.screenshot(path=str(SHOTS / "57-11-stack-tables.png"), full_page=True)
            # its History: every version the API lists, each with its operation, newest first
            row.get_by_role("link", name="sales", exact=True).click()
            page.get_by_role("link", name="History", exact=True).first.click()
            expect(page.locator("#history-count")).to_contain_text(f"of {len(operations)}")
            shown = page.locator("table.history tbody tr[id^=v]")
            versions = [int(v) for v in shown.evaluate_all("rs => rs.map(r => r.id.slice(1))")]
            assert versions == sorted(operations, reverse=True)
            for version, operation in operations.items():
                expect(page.locator(f"#v{version}")).to_contain_text(operation)
            page.screenshot(path=str(SHOTS / "57-11-stack.png"), full_page=True)
            # what a load balancer and an operator read: alive, and ready with every check ok
            alive = page.goto(stack.base + "/healthz")
            assert alive.status == 200 and alive.text().strip() == "ok"
            answer = page.goto(stack.base + "/readyz")
            checks = answer.json()
            assert answer.status == 200 and checks["status"] == "ok" and checks["down"] == [], checks
            assert all(c["ok"] for c in checks["checks"].values()), checks
            csp.assert_no_violations(context)
        finally:
            context.close()
            browser.close()
    assert errors == []


def test_a_worker_killed_in_the_middle_of_a_sync_leaves_the_job_failed_with_the_reason(stack, sales, users) -> None:
    """The worker container is replaced by one that stops at a named point of the sync (the
    fault suite's DELTAWEB_FAULT_POINTS) and killed there: the beat's sweep ends the job with
    the reason, and the same sync started again on a new worker succeeds."""
    ana, table = users["ana"], sales["id"]
    ana.until(f"/api/tables/{table}/", lambda t: t["syncState"] == "ok")
    (REPO / "var" / "stack-logs").mkdir(parents=True, exist_ok=True)
    (REPO / "var" / "stack-logs" / "worker-first.log").write_text(stack.logs("worker"))
    normal = dict(stack.services["worker"]["environment"])
    faults = {"DELTAWEB_FAULT_POINTS": "sync-stored", "DELTAWEB_FAULT_DIR": "/tmp", "DELTAWEB_FAULT_WAIT": "300"}
    stack.services["worker"]["environment"] = {**normal, **faults}
    stack.create("worker")
    stack.wait_healthy("worker")
    try:
        # a new commit, so the sync has something to store (its push may start the same sync,
        # which the request then joins)
        wrote = stack.run("seed", "python", "-c", PUSHED)
        assert wrote.returncode == 0, wrote.stderr[-2000:]
        status, job = ana.call("POST", f"/api/tables/{table}/sync/")
        assert status in (200, 202), job
        deadline = time.monotonic() + 120
        while stack.exec("worker", "test", "-f", "/tmp/sync-stored").returncode != 0:
            assert time.monotonic() < deadline, stack.logs("worker")[-3000:]
            time.sleep(0.5)
        stack.kill("worker")
    finally:
        stack.services["worker"]["environment"] = normal
    # its restart policy's new worker (without the stop): the beat's sweep, which a worker runs,
    # finds the job silent and ends it with the reason
    stack.create("worker")
    stack.wait_healthy("worker")
    ended = ana.job(job["id"], 180)
    assert ended["status"] == "failed" and "worker was killed" in ended["error"]
    status, again = ana.call("POST", f"/api/tables/{table}/sync/")
    assert status == 202 and again["id"] != job["id"]
    assert ana.job(again["id"])["status"] == "succeeded"


CONNECT = """
import sys
from tables.spark.engine.connect import SparkUnavailable, connect
try:
    print(connect(sys.argv[1]).range(3).count())
except SparkUnavailable as refused:
    print(type(refused).__name__, refused)
"""


def test_the_connect_server_refuses_a_client_inside_the_network_without_its_token(stack, sales) -> None:
    """Inside the compose network: a client with the token over TLS gets an answer; without
    it, or with another, it is refused; in plain text (no TLS) nothing answers."""
    url = "sc://spark-connect:15002/;use_ssl=true"

    def attempt(remote: str, token: str) -> str:
        ran = stack.run("worker", "python", "-c", CONNECT, remote, env={"DELTAWEB_SPARK_CONNECT_TOKEN": token})
        assert ran.returncode == 0, ran.stderr[-2000:]
        return ran.stdout.strip().splitlines()[-1]

    token = stack.services["worker"]["environment"]["DELTAWEB_SPARK_CONNECT_TOKEN"]
    assert attempt(url, token) == "3"
    assert attempt(url, "").startswith("SparkTokenRefused") and "none was sent" in attempt(url, "")
    assert attempt(url, "not-" + token).startswith("SparkTokenRefused")
    assert attempt("sc://spark-connect:15002", "").startswith("SparkUnavailable")


INTRUDER = """
import os, subprocess, time, pyspark
submit = os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-submit")
open("/tmp/intruder.py", "w").write(
    "from pyspark import SparkContext; SparkContext(master='spark://spark-master:7077', appName='intruder')")
proc = subprocess.Popen([submit, "/tmp/intruder.py"], stderr=subprocess.PIPE, text=True)
deadline, seen = time.time() + 300, "nothing"
for line in proc.stderr:
    if "Failed to connect to master" in line or "Connected to Spark cluster" in line:
        seen = line.strip()
        break
    if time.time() > deadline:
        break
proc.kill()
print(seen)
"""


def test_the_spark_master_refuses_an_application_without_the_shared_secret(stack, sales) -> None:
    ran = stack.run("seed", "python", "-c", INTRUDER)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert "Failed to connect to master" in ran.stdout.strip().splitlines()[-1]
    assert "intruder" not in stack.logs("spark-master")
