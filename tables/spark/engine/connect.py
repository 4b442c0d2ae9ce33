"""Spark Connect: Spark as one shared service, and this process as its client.

Contract:
- DELTAWEB_SPARK_REMOTE (`sc://host:port`) names a Spark Connect server. When it is set,
  `tables.spark.session.get_spark` returns a client session to it (`connect`): no JVM in this
  process, the jobs' plans go to the server, which runs them on its own master (local, or the
  standalone cluster it was started on). Unset, the worker keeps its in-process session.
- The server is started with the same conservative configuration an in-process local session
  gets (`server_args`: BASE_CONF and the rest from tables.spark.session, one declaration) and
  the executors' Python named the same way; `scripts/spark_connect.sh` runs it with
  `spark-submit --class org.apache.spark.sql.connect.service.SparkConnectServer`, bound to
  127.0.0.1 (SPARK_CONNECT_HOST) on SPARK_CONNECT_PORT (15002).
- A process is a Connect client or a classic driver, never both: PySpark picks the
  implementation of its functions (`pyspark.sql.functions`, Observation) by one process-wide
  flag (SPARK_CONNECT_MODE_ENABLED), which `connect` sets.
- An unreachable server is retried briefly (DELTAWEB_SPARK_CONNECT_RETRIES, 4: about 4 s in
  all), not PySpark's default ten minutes, then SparkUnavailable names the address, never its
  parameters (a token may be among them).
- A pre-shared token (DELTAWEB_SPARK_CONNECT_TOKEN, from the environment only): the server
  gets it as SPARK_CONNECT_AUTHENTICATE_TOKEN (scripts/spark_connect.sh; Spark's own
  PreSharedKeyAuthenticationInterceptor then refuses every call without it, UNAUTHENTICATED),
  the client sends it as a bearer token on every call (`token_channel`). gRPC sends a bearer
  token only over a channel it deems secure: to a loopback server its local credentials (no
  TLS, the peer checked to be on this machine), else TLS (`;use_ssl=true`); a plain channel
  to another host with a token is refused here. A refused client gets SparkTokenRefused,
  which says so and never shows the token.
"""

from __future__ import annotations

import os
import sys
import weakref
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

REMOTE_ENV = "DELTAWEB_SPARK_REMOTE"
TOKEN_ENV = "DELTAWEB_SPARK_CONNECT_TOKEN"
# what Spark's server reads its token from (Connect.CONNECT_AUTHENTICATE_TOKEN_ENV, Spark 4.0)
SERVER_TOKEN_ENV = "SPARK_CONNECT_AUTHENTICATE_TOKEN"
RETRIES_ENV = "DELTAWEB_SPARK_CONNECT_RETRIES"
PORT_ENV = "SPARK_CONNECT_PORT"
AUTH_SECRET_ENV = "_SPARK_AUTH_SECRET"  # Spark's SecurityManager.ENV_AUTH_SECRET
HOST_ENV = "SPARK_CONNECT_HOST"
DEFAULT_PORT = 15002
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
_MODE_FLAG = "SPARK_CONNECT_MODE_ENABLED"


class SparkUnavailable(RuntimeError):
    """The Spark Connect server did not answer (down, restarting, or another address)."""

    code = "spark_unavailable"

    def __init__(self, url: str, reason: str = "") -> None:
        self.address = shown_address(url)
        why = f" ({reason})" if reason else ""
        super().__init__(
            f"the Spark Connect server at {self.address} is not answering{why}; start it "
            f"(scripts/spark_connect.sh start) or unset {REMOTE_ENV} to run Spark in the worker"
        )


class SparkTokenRefused(SparkUnavailable):
    """The Connect server refused this client: no token sent to a server that wants one, or
    not the server's token. The token itself is never shown."""

    def __init__(self, url: str, sent: bool) -> None:
        self.address = shown_address(url)
        if sent:
            why = f"refused this client's token ({TOKEN_ENV} is not the token the server was started with)"
        else:
            why = f"refused this client: it requires a token and none was sent (set {TOKEN_ENV})"
        RuntimeError.__init__(self, f"the Spark Connect server at {self.address} {why}")


def configured_token() -> str | None:
    """The token to send to the Connect server: DELTAWEB_SPARK_CONNECT_TOKEN; None for none."""
    return os.environ.get(TOKEN_ENV, "").strip() or None


def remote_url(value: str | None = None) -> str | None:
    """The Connect server's URL: `value`, else DELTAWEB_SPARK_REMOTE; None for none."""
    url = (value if value is not None else os.environ.get(REMOTE_ENV, "")).strip()
    if not url:
        return None
    if not url.startswith("sc://"):
        raise ValueError(f"{REMOTE_ENV} must be an sc:// URL (sc://host:port), got {shown_address(url)!r}")
    return url


def shown_address(url: str) -> str:
    """`sc://host:port` of a Connect URL: its parameters (`;token=...`) and any user part left out."""
    rest = url.split("://", 1)[-1]
    host = rest.split("/", 1)[0].split(";", 1)[0].rsplit("@", 1)[-1]
    return f"sc://{host[:200]}"


_urls: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()


def address_of(spark: Any) -> str:
    """The `sc://host:port` a client session talks to (no parameters)."""
    return shown_address(_urls.get(spark, "sc://unknown"))


def is_connect(spark: Any) -> bool:
    """Whether `spark` is a Spark Connect client session (no JVM here)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def _grpc_status(exc: BaseException) -> str:
    """The gRPC status name of an error (its own or that of an error it came from), '' if none."""
    code = getattr(exc, "code", None)
    if callable(code):
        try:
            return str(getattr(code(), "name", "") or "")
        except Exception:  # not a gRPC error after all
            return ""
    return ""


def _chain(exc: BaseException) -> list[BaseException]:
    """The error and those it came from (cause or context), each once."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not e for e in seen):
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def is_unavailable(exc: BaseException) -> bool:
    """Whether an error means the server did not answer (connection refused, reset, gone)."""
    return any(type(e).__name__ == "RetriesExceeded" or _grpc_status(e) == "UNAVAILABLE" for e in _chain(exc))


def is_refused(exc: BaseException) -> bool:
    """Whether an error is the server refusing this client (gRPC UNAUTHENTICATED)."""
    return any(_grpc_status(e) == "UNAUTHENTICATED" for e in _chain(exc))


def _url_has_token(url: str) -> bool:
    params = url.split("://", 1)[-1].split("/", 1)[-1].split(";")[1:]
    return any(p.split("=", 1)[0].strip() == "token" for p in params)


def _loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def token_channel(url: str, token: str) -> Any:
    """PySpark's channel builder for `url` that sends `token` as a bearer token on every call:
    over gRPC's local credentials to a loopback host (plain TCP, which the server speaks; gRPC
    checks the peer is on this machine), over TLS with `;use_ssl=true`. PySpark's own builder
    sends a token only to `localhost` or over TLS (`127.0.0.1` would get a TLS handshake the
    server does not speak). ValueError for a plain channel to another host: the token would
    cross the network in the clear."""
    import grpc
    from pyspark.sql.connect.client import DefaultChannelBuilder

    class TokenChannelBuilder(DefaultChannelBuilder):
        @property
        def token(self) -> str:
            return token

        def toChannel(self) -> Any:
            if self.use_ssl:
                return super().toChannel()  # TLS with the bearer token, PySpark's own way
            local = grpc.local_channel_credentials(grpc.LocalConnectionType.LOCAL_TCP)
            creds = grpc.composite_channel_credentials(local, grpc.access_token_call_credentials(token))
            return self._secure_channel(self.endpoint, creds)

    builder = TokenChannelBuilder(url)
    if not builder.use_ssl and not _loopback(builder.host):
        raise ValueError(
            f"{TOKEN_ENV} is set but {shown_address(url)} is not on this machine: the token is sent "
            "to a loopback address or over TLS (add ;use_ssl=true to the URL) only"
        )
    return builder


def connect(url: str, token: str | None = None) -> SparkSession:
    """A new client session to the server at `url`, checked with one round trip, sending
    `token` (else DELTAWEB_SPARK_CONNECT_TOKEN; a `;token=` in the URL is PySpark's own way and
    wins); SparkUnavailable when it does not answer, SparkTokenRefused when it refuses us."""
    os.environ[_MODE_FLAG] = "1"  # PySpark's functions: the Connect implementations from now on
    from pyspark.sql.connect.client.retries import DefaultPolicy
    from pyspark.sql.connect.session import SparkSession as RemoteSession

    token = token if token is not None else configured_token()
    if token and not _url_has_token(url):
        spark = RemoteSession.builder.channelBuilder(token_channel(url, token)).create()
    else:
        spark = RemoteSession.builder.remote(url).create()
    _urls[spark] = url
    retries = max(0, int(os.environ.get(RETRIES_ENV, "4")))
    # 50 ms, 200 ms, 800 ms, 2 s, 2 s...: a restarting server is waited for, a dead one named soon
    spark.client.set_retry_policies([DefaultPolicy(max_retries=retries, max_backoff=2000)])
    try:
        ping(spark, url)
    except Exception:
        discard(spark, release=False)
        raise
    return spark


def discard(spark: Any, release: bool = True) -> None:
    """Close a client session for good (`release`: tell the server to drop its state too, which
    a server that is gone cannot hear). Its client is then taken from it: PySpark's __del__
    closes the client again when the object is collected, and closing shuts down the thread
    pool every session shares, which, done by the garbage collector in whatever thread it
    runs, deadlocks that thread's running query (PySpark 4.0.1)."""
    spark.release_session_on_close = release
    try:
        spark.stop()
    finally:
        spark.__dict__.pop("_client", None)  # __del__ finds no client and does nothing


def ping(spark: Any, url: str) -> None:
    """One round trip to the server; SparkUnavailable when it does not answer,
    SparkTokenRefused when it refuses this client's token (or the lack of one)."""
    try:
        spark.conf.get("spark.master")
    except Exception as exc:
        if is_unavailable(exc):
            raise SparkUnavailable(url, "connection refused or lost") from None
        if is_refused(exc):
            raise SparkTokenRefused(url, sent=spark.client.token is not None) from None
        raise


def server_conf(master: str) -> dict[str, str]:
    """The server's Spark configuration: what tables.spark.session gives an in-process session
    on `master` (one declaration), the executors' Python for the server's own Python work
    too (it runs the clients' Python data sources and functions), the server's address."""
    from tables.spark.engine.conf import executor_python, session_conf

    conf = session_conf(master, "deltaweb-connect")
    python = executor_python()
    conf["spark.pyspark.python"] = conf["spark.pyspark.driver.python"] = python
    # loopback unless told (docker-compose: the internal network, the port never published)
    conf["spark.connect.grpc.binding.address"] = os.environ.get(HOST_ENV, "127.0.0.1")
    conf["spark.connect.grpc.binding.port"] = str(int(os.environ.get(PORT_ENV, DEFAULT_PORT)))
    if os.environ.get(AUTH_SECRET_ENV):
        # a cluster that requires spark.authenticate (docker-compose.yml): the secret is read from
        # Spark's own variable, first of all its sources, by this driver and (given by the
        # workers) its executors; a standalone driver also insists the key be configured, so the
        # conf names the variable instead of holding the secret (never on a command line)
        conf["spark.authenticate"] = "true"
        conf["spark.authenticate.secret"] = f"${{env:{AUTH_SECRET_ENV}}}"
    # the clients' progress handlers get the stages' tasks this often
    conf.setdefault("spark.connect.progress.reportInterval", "1s")
    # the server's own log (var/spark-connect/server.log): warnings and errors, not every task
    conf.setdefault("spark.log.level", os.environ.get("SPARK_LOG_LEVEL", "WARN"))
    return conf


def server_args(master: str) -> list[str]:
    """spark-submit's arguments for the server on `master` (the script adds the executable)."""
    args = ["--class", SERVER_CLASS, "--name", "deltaweb-connect"]
    for key, value in server_conf(master).items():
        if key != "spark.app.name":
            args += ["--conf", f"{key}={value}"]
    return args


def main(argv: list[str]) -> int:
    """`python -m tables.spark.engine.connect server-args [MASTER]`: the server's spark-submit
    arguments, one a line (scripts/spark_connect.sh); `python` is the executors' Python."""
    from tables.spark.engine.conf import resolve_master

    if len(argv) < 1 or argv[0] not in ("server-args", "python"):
        print("usage: python -m tables.spark.engine.connect server-args [MASTER] | python", file=sys.stderr)
        return 2
    if argv[0] == "python":
        from tables.spark.engine.conf import executor_python

        print(executor_python())
        return 0
    for arg in server_args(resolve_master(argv[1] if len(argv) > 1 else None)):
        print(arg)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
