"""Settings, all from the environment; with nothing set, runs on SQLite for development."""

from __future__ import annotations

import os
from pathlib import Path

import dj_database_url

from deltaweb.kept_secrets import VAR_DIR, kept_secret

BASE_DIR = Path(__file__).resolve().parent.parent
(BASE_DIR / "var" / "static").mkdir(parents=True, exist_ok=True)


def env(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool = False) -> bool:
    return env(name, str(default)).strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: str = "") -> list[str]:
    return [item.strip() for item in env(name, default).split(",") if item.strip()]


DEBUG = env_bool("DELTAWEB_DEBUG", False)
# The directory of the files a process keeps for itself (var/secret.key); DELTAWEB_VAR_DIR moves it.
DELTAWEB_VAR_DIR = VAR_DIR
# A deployment (the image sets DELTAWEB_PRODUCTION=1) passes DELTAWEB_SECRET_KEY and refuses to
# start without it. A development start without it keeps a random key in var/secret.key (mode
# 0600), never one derived from anything public. An empty variable is refused either way.
DELTAWEB_PRODUCTION = env_bool("DELTAWEB_PRODUCTION", False)
if DELTAWEB_PRODUCTION and "DELTAWEB_SECRET_KEY" not in os.environ:
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured("DELTAWEB_SECRET_KEY is not set: a production start needs a long random key")
SECRET_KEY = kept_secret("DELTAWEB_SECRET_KEY", "secret.key")
ALLOWED_HOSTS = env_list("DELTAWEB_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver")
CSRF_TRUSTED_ORIGINS = env_list("DELTAWEB_CSRF_TRUSTED_ORIGINS")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "tables",
    "credentials",
]
# Alerts are an app of their own that plugs into tables through a signal (commits stored) and
# optional templates; DELTAWEB_ALERTS=0 runs without it.
DELTAWEB_ALERTS = env_bool("DELTAWEB_ALERTS", True)
if DELTAWEB_ALERTS:
    INSTALLED_APPS.insert(INSTALLED_APPS.index("tables") + 1, "alerts")

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # serves /static/ in deployments too (after collectstatic), with no extra web server
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "tables.site.middleware.SecurityHeadersMiddleware",
    "tables.site.middleware.ProjectErrorPagesMiddleware",
]
# the first middleware refuses a body over DATA_UPLOAD_MAX_MEMORY_SIZE by its Content-Length (413)
MIDDLEWARE.insert(0, "tables.site.middleware.RequestSizeMiddleware")
# then a request no view could read (too many fields, JSON nested too deep): 400 before any view
MIDDLEWARE.insert(1, "tables.site.middleware.RequestShapeMiddleware")
MIDDLEWARE.insert(0, "tables.web.ops.RequestMetricsMiddleware")  # first: it times everything
MIDDLEWARE.insert(1, "deltaweb.logs.RequestContextMiddleware")  # the request id for every line after

# Logs: `text` (default) or `json`, one object per line with the request id, user, table and job
# (deltaweb/logs.py); DELTAWEB_LOG_LEVEL for the project's own loggers.
DELTAWEB_LOG_FORMAT = env("DELTAWEB_LOG_FORMAT", "text")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "json": {"()": "deltaweb.logs.JsonFormatter"},
        "text": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"},
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": "json" if DELTAWEB_LOG_FORMAT == "json" else "text"}
    },
    "root": {"handlers": ["console"], "level": "WARNING"},
    "loggers": {
        name: {"level": env("DELTAWEB_LOG_LEVEL", "INFO")}  # to the root's handler
        for name in ("tables", "alerts", "credentials", "deltaweb")
    }
    | {
        # runserver's own plain line per request: deltaweb.access writes it (with the request id),
        # so only its warnings stay, in this format
        "django.server": {"handlers": ["console"], "level": "WARNING", "propagate": False},
    },
}
# the worker keeps this configuration instead of Celery's own (so its lines are JSON too)
CELERY_WORKER_HIJACK_ROOT_LOGGER = DELTAWEB_LOG_FORMAT != "json"

# /metrics answers these networks (CIDR, comma-separated) or a bearer token; nobody else
DELTAWEB_METRICS_ALLOWED = env_list("DELTAWEB_METRICS_ALLOWED", "127.0.0.1/32,::1/128")
DELTAWEB_METRICS_TOKEN = env("DELTAWEB_METRICS_TOKEN", "")
# a sync-lag and a failures series per table (unbounded with the fleet); fleet-level by default
DELTAWEB_METRICS_PER_TABLE = env("DELTAWEB_METRICS_PER_TABLE", "") in ("1", "true", "yes")

ROOT_URLCONF = "deltaweb.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "tables.web.base.ui.site_context",  # alerts installed? background work paused?
            ],
            "builtins": ["tables.templatetags.times"],  # {{ moment|when }}: the one time format
        },
    },
]
WSGI_APPLICATION = "deltaweb.wsgi.application"

DATABASES = {
    "default": dj_database_url.parse(
        env("DATABASE_URL", f"sqlite:///{BASE_DIR / 'var' / 'deltaweb.sqlite3'}"), conn_max_age=60
    )
}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # a file, not memory, so that a real Celery worker process sees the test database
    # (one file per test process, so parallel runs on one checkout do not collide)
    DATABASES["default"]["TEST"] = {
        "NAME": env("DELTAWEB_TEST_DB", str(BASE_DIR / "var" / f"test-{os.getpid()}.sqlite3"))
    }
    # concurrent writers (API requests, the sync, workers) wait for each other instead of failing
    # with "database is locked": WAL lets readers run beside one writer, and IMMEDIATE
    # transactions take the write lock at BEGIN, where SQLite's busy timeout applies (a deferred
    # transaction that upgrades from read to write fails at once when another writer holds it)
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "timeout": 30,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
    )
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LANGUAGE_CODE = "en-us"
FORMAT_MODULE_PATH = ["deltaweb.formats"]  # ISO 8601 in the admin too
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(env("DELTAWEB_STATIC_ROOT", str(BASE_DIR / "var" / "static")))
# collectstatic gives every file a content-hashed name and a .gz copy; WhiteNoise serves them
# compressed with a far-future cache. Files not collected yet (a fresh checkout, the tests) keep
# their plain names and are served from the finders (tables/web/base/staticfiles.py).
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "tables.web.base.staticfiles.StaticStorage"},
}
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
    "tables.web.base.staticfiles.PlotlyFinder",  # plotly.min.js from the installed package
]
# Static files from the apps' own directories (no collectstatic needed: a checkout, the tests);
# make run sets both to 0 after collectstatic, so the collected, compressed files are served
# even in debug mode, as in a deployment.
WHITENOISE_USE_FINDERS = env_bool("DELTAWEB_STATIC_FINDERS", True)
WHITENOISE_AUTOREFRESH = env_bool("DELTAWEB_STATIC_AUTOREFRESH", DEBUG)
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "/"
# Django's password sign-in; each request's user (and its roles) is read by one query
AUTHENTICATION_BACKENDS = ["tables.services.access.auth_backend.RoleModelBackend"]
SESSION_ENGINE = "tables.services.access.session_store"  # Django's database sessions, read by one query

# Single sign-on (OpenID Connect; tables/services/access/oidc.py): on with an issuer; its
# endpoints from the issuer's discovery document; roles from a groups claim through the map
# (`provider-group=role`, roles analyst, approver, admin); DELTAWEB_LOCAL_LOGIN=0 turns the
# password form off.
DELTAWEB_OIDC_ISSUER = env("DELTAWEB_OIDC_ISSUER", "")
DELTAWEB_OIDC_ROLE_MAP = env_list("DELTAWEB_OIDC_ROLE_MAP", "")
DELTAWEB_OIDC_GROUPS_CLAIM = env("DELTAWEB_OIDC_GROUPS_CLAIM", "groups")
DELTAWEB_LOCAL_LOGIN = env_bool("DELTAWEB_LOCAL_LOGIN", True)
# `make run` sets it: the sign-in page then names the demo users and where their password is
DELTAWEB_DEMO = env_bool("DELTAWEB_DEMO", False)
# API tokens stop working after this many days (a user rotates or revokes theirs on /account/)
DELTAWEB_TOKEN_DAYS = int(env("DELTAWEB_TOKEN_DAYS", "90"))
# Delta Sharing (docs/sharing.md): the endpoint as recipients reach it (empty: as each request
# reached it; set it behind a proxy that ends TLS), how long a recipient's token and a file URL live
DELTAWEB_SHARING_URL = env("DELTAWEB_SHARING_URL", "")
DELTAWEB_SHARING_TOKEN_DAYS = int(env("DELTAWEB_SHARING_TOKEN_DAYS", "90"))
DELTAWEB_SHARING_URL_SECONDS = int(env("DELTAWEB_SHARING_URL_SECONDS", "900"))
# wrong bearer tokens one address may send before it is refused (429) for the rest of the window
DELTAWEB_SHARING_TOKEN_RATE = env("DELTAWEB_SHARING_TOKEN_RATE", "20/minute")
# where the file-URL key is kept when DELTAWEB_SHARING_URL_KEY is unset (var/sharing-url.key)
DELTAWEB_SHARING_KEY_DIR = env("DELTAWEB_SHARING_KEY_DIR", "")
OIDC_RP_CLIENT_ID = env("DELTAWEB_OIDC_CLIENT_ID", "")
OIDC_RP_CLIENT_SECRET = env("DELTAWEB_OIDC_CLIENT_SECRET", "")
OIDC_RP_SIGN_ALGO = env("DELTAWEB_OIDC_SIGN_ALGO", "RS256")
OIDC_RP_SCOPES = env("DELTAWEB_OIDC_SCOPES", "openid email profile groups")
OIDC_AUTHENTICATION_CALLBACK_URL = "oidc_callback"
LOGIN_REDIRECT_URL_FAILURE = "/accounts/login/?sso=refused"
LOGOUT_REDIRECT_URL = "/accounts/login/"
if DELTAWEB_OIDC_ISSUER:
    AUTHENTICATION_BACKENDS.insert(0, "tables.services.access.oidc.Backend")
if not DELTAWEB_LOCAL_LOGIN:
    AUTHENTICATION_BACKENDS.remove("tables.services.access.auth_backend.RoleModelBackend")

# --- security defaults ---------------------------------------------------------------------
# Debug mode (make run) still answers the project's own 404/500 pages, not Django's pages that
# list the URL configuration, settings and tracebacks; DELTAWEB_DEBUG_PAGES=1 asks for those.
DELTAWEB_DEBUG_PAGES = env_bool("DELTAWEB_DEBUG_PAGES", False)
# /api/schema/ and /api/docs/ need a signed-in user unless the schema is meant to be public.
DELTAWEB_PUBLIC_SCHEMA = env_bool("DELTAWEB_PUBLIC_SCHEMA", False)
# Failed sign-ins per client IP and username on the login form, and requests per client on
# POST /api/auth/token/ (DRF's rate syntax: N/second|minute|hour|day).
DELTAWEB_LOGIN_RATE = env("DELTAWEB_LOGIN_RATE", "10/minute")
DELTAWEB_TOKEN_RATE = env("DELTAWEB_TOKEN_RATE", "10/minute")
# How many proxies of ours stand in front of the web processes, each appending the address it
# saw to X-Forwarded-For. 0 (the default): the header is ignored and clients are identified by
# REMOTE_ADDR, since anyone can send the header.
DELTAWEB_TRUSTED_PROXIES = int(env("DELTAWEB_TRUSTED_PROXIES", "0"))
# Only the app's own scripts, styles, images and fonts (plotly is served from /vendor/, Swagger UI
# from the sidecar under /static/); no inline script or style, no framing. Swagger UI's page alone
# adds 'unsafe-inline' to style-src (tables.api.auth.DocsView): it styles itself inline.
DELTAWEB_CSP = env(
    "DELTAWEB_CSP",
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; "
    "connect-src 'self'; object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'",
)
X_FRAME_OPTIONS = "DENY"
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CONTENT_TYPE_NOSNIFF = True
CSRF_FAILURE_VIEW = "tables.site.errors.csrf_failure"
SESSION_COOKIE_HTTPONLY = True
# Behind TLS (the image turns these on; `make run` serves plain http and leaves them off): the
# session and CSRF cookies only over https, and HSTS for this many seconds, sent on requests that
# came over https. DELTAWEB_PROXY_SSL_HEADER names the header a TLS-ending proxy sets to `https`
# (e.g. X-Forwarded-Proto); set it only when that proxy always sets or strips it.
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = env_bool("DELTAWEB_SECURE_COOKIES", False)
SECURE_HSTS_SECONDS = int(env("DELTAWEB_HSTS_SECONDS", "0") or 0)
if env("DELTAWEB_PROXY_SSL_HEADER").strip():
    SECURE_PROXY_SSL_HEADER = (
        "HTTP_" + env("DELTAWEB_PROXY_SSL_HEADER").strip().upper().replace("-", "_"),
        "https",
    )
# Two applications on one host share cookies by name (ports do not separate them): give each its own.
SESSION_COOKIE_NAME = env("DELTAWEB_SESSION_COOKIE_NAME", "sessionid")

# Tables may only be registered under these roots (after resolving symlinks and '..').
# A relative root (`var/tables`) is the project directory's, whatever directory a process starts in.
DELTAWEB_ALLOWED_ROOTS = [
    r if "://" in r or os.path.isabs(r) else str(BASE_DIR / r)
    for r in env_list("DELTAWEB_ALLOWED_ROOTS", str(BASE_DIR / "var" / "tables"))
]
# How often each table is probed for new commits (one storage request; a sync job only when it
# changed), the beat's tick that sends the due ones, tables per probe task, batches per tick,
# and the longest backoff of a table whose probe or sync keeps failing.
DELTAWEB_SYNC_INTERVAL_SECONDS = int(env("DELTAWEB_SYNC_INTERVAL_SECONDS", "300"))
# Push: the SQS queue that receives the buckets' S3 event notifications (`manage.py
# listen_events` syncs the tables they name within seconds); its region when the URL does not say;
# its endpoint when not AWS's own (AWS_ENDPOINT_URL is the object store's, never used for SQS).
DELTAWEB_SQS_QUEUE_URL = env("DELTAWEB_SQS_QUEUE_URL", "")
DELTAWEB_SQS_REGION = env("DELTAWEB_SQS_REGION", "")
DELTAWEB_SQS_ENDPOINT_URL = env("DELTAWEB_SQS_ENDPOINT_URL", "")
# Discovery from an AWS Glue Data Catalog: its region (else AWS_REGION / AWS_DEFAULT_REGION), and
# its endpoint when not AWS's own (as for SQS).
DELTAWEB_GLUE_REGION = env("DELTAWEB_GLUE_REGION", "")
DELTAWEB_GLUE_ENDPOINT_URL = env("DELTAWEB_GLUE_ENDPOINT_URL", "")
# Finished jobs (and alerts' finished scans and deliveries) older than this are deleted daily;
# restore requests, approvals and the history are kept.
DELTAWEB_RETENTION_DAYS = float(env("DELTAWEB_RETENTION_DAYS", "30"))
DELTAWEB_PROBE_TICK_SECONDS = float(env("DELTAWEB_PROBE_TICK_SECONDS", "10"))
DELTAWEB_PROBE_BATCH = int(env("DELTAWEB_PROBE_BATCH", "500"))
DELTAWEB_PROBE_MAX_BATCHES = int(env("DELTAWEB_PROBE_MAX_BATCHES", "40"))
DELTAWEB_SYNC_BACKOFF_MAX_SECONDS = float(env("DELTAWEB_SYNC_BACKOFF_MAX_SECONDS", "21600"))
# above this many versions pages show reachability computed in the background, never waiting
DELTAWEB_REACHABILITY_INLINE_VERSIONS = int(env("DELTAWEB_REACHABILITY_INLINE_VERSIONS", "5000"))
# a page that starts a data job waits this long for it to end before it shows its progress:
# a warm interactive job ends within about a second, and its rows then show at once
DELTAWEB_JOB_SETTLE_SECONDS = float(env("DELTAWEB_JOB_SETTLE_SECONDS", "1.5"))
# the reachability API waits this long for a worker's answer on a long log, then says to ask again
DELTAWEB_REACHABILITY_WAIT_SECONDS = float(env("DELTAWEB_REACHABILITY_WAIT_SECONDS", "20"))
# Each sync looks for files the log still references that are gone (VACUUM, or anyone): a local
# table is listed every sync; an object store every N syncs (and at once after a VACUUM commit)
# asks about a sample of the files a VACUUM would delete first, and lists the table only when
# one is gone (see docs/fleet.md, "Files removed outside the log").
DELTAWEB_VACUUM_CHECK = env_bool("DELTAWEB_VACUUM_CHECK", True)
DELTAWEB_VACUUM_CHECK_EVERY_SYNCS = int(env("DELTAWEB_VACUUM_CHECK_EVERY_SYNCS", "10"))
DELTAWEB_VACUUM_CHECK_SAMPLE = int(env("DELTAWEB_VACUUM_CHECK_SAMPLE", "16"))
DELTAWEB_VACUUM_CHECK_LIST_ON_MISS = env_bool("DELTAWEB_VACUUM_CHECK_LIST_ON_MISS", True)
DELTAWEB_VACUUM_MISSING_KEPT = int(env("DELTAWEB_VACUUM_MISSING_KEPT", "500000"))
# the chain of what was seen (tables/services/chain/look.py): every table's log compared with its
# first-seen digests once per DELTAWEB_CHAIN_CHECK_HOURS (besides each sync), at most
# DELTAWEB_CHAIN_CHECK_BATCH tables per tick of DELTAWEB_CHAIN_CHECK_TICK_SECONDS, each look
# reading again DELTAWEB_CHAIN_REHASH_PER_LOOK of its least recently hashed commits (0: none)
DELTAWEB_CHAIN_CHECK = env_bool("DELTAWEB_CHAIN_CHECK", True)
DELTAWEB_CHAIN_CHECK_HOURS = float(env("DELTAWEB_CHAIN_CHECK_HOURS", "24"))
DELTAWEB_CHAIN_CHECK_TICK_SECONDS = float(env("DELTAWEB_CHAIN_CHECK_TICK_SECONDS", "300"))
DELTAWEB_CHAIN_CHECK_BATCH = int(env("DELTAWEB_CHAIN_CHECK_BATCH", "500"))
DELTAWEB_CHAIN_REHASH_PER_LOOK = int(env("DELTAWEB_CHAIN_REHASH_PER_LOOK", "10"))
# a sync compares the last N versions (all of a shorter log); the rolling check compares them all
DELTAWEB_CHAIN_SYNC_WINDOW = int(env("DELTAWEB_CHAIN_SYNC_WINDOW", "1000"))
# the Ed25519 key the audit export is signed with: PEM (PKCS#8) or the base64 of its 32 raw
# bytes; DELTAWEB_AUDIT_KEY_FILE names a file holding it instead. Without either, a development
# start signs with a key made on first use in DELTAWEB_VAR_DIR/audit-signing.key (mode 0600);
# a production start (DELTAWEB_PRODUCTION) has exports off and says why.
DELTAWEB_AUDIT_KEY = env("DELTAWEB_AUDIT_KEY", "")
DELTAWEB_AUDIT_KEY_FILE = env("DELTAWEB_AUDIT_KEY_FILE", "")

CELERY_BROKER_URL = env("CELERY_BROKER_URL", "redis://127.0.0.1:6379/0")
# Job state lives on Job rows in the database, so task results are not stored anywhere else.
CELERY_RESULT_BACKEND = env("CELERY_RESULT_BACKEND") or None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
# the beat's scheduler leaves a heartbeat at each tick (tables/services/ops/beat.py): in the shared cache for
# /metrics, and in this file (when set) for a container's liveness check
CELERY_BEAT_SCHEDULER = "tables.services.ops.beat.Scheduler"
DELTAWEB_BEAT_HEARTBEAT_FILE = env("DELTAWEB_BEAT_HEARTBEAT_FILE", "")

SPARK_MASTER = env("SPARK_MASTER", "local[*]")
# A Spark Connect server (sc://host:port): the worker's Spark jobs run there, the worker holds no
# JVM (tables.spark.engine.connect reads the same variable); unset: the worker's own session.
DELTAWEB_SPARK_REMOTE = env("DELTAWEB_SPARK_REMOTE", "").strip()
# Spark jobs for previews, change data and row diffs write their results (Parquet) under
# <DELTAWEB_RESULTS_DIR>/job-<id>/; the web process pages them with pyarrow.
DELTAWEB_RESULTS_DIR = env("DELTAWEB_RESULTS_DIR", str(BASE_DIR / "var" / "results"))
# SQL at a version (tables/services/query): a statement's length, the rows a result keeps (the
# download's cap; the page shows the first DELTAWEB_QUERY_ROWS_SHOWN), its run time before it is
# cancelled, and the queries one user may have queued or running at once
DELTAWEB_QUERY_MAX_LENGTH = int(env("DELTAWEB_QUERY_MAX_LENGTH", "20000"))
DELTAWEB_QUERY_MAX_ROWS = int(env("DELTAWEB_QUERY_MAX_ROWS", "100000"))
DELTAWEB_QUERY_ROWS_SHOWN = int(env("DELTAWEB_QUERY_ROWS_SHOWN", "10000"))
DELTAWEB_QUERY_SECONDS = int(env("DELTAWEB_QUERY_SECONDS", "300"))
DELTAWEB_QUERY_CONCURRENT = int(env("DELTAWEB_QUERY_CONCURRENT", "2"))
# Pins: each pinned version is written as a table of its own under <DELTAWEB_PIN_STORE>/<table
# id>/<pin id>-v<version>/ (files hard-linked where the store shares the tables' file system, else
# copied; on an object store, server-side copies). deltaweb owns it: no table's writer or VACUUM
# touches it. Reads are allowed there as under DELTAWEB_ALLOWED_ROOTS.
_pin_store = env("DELTAWEB_PIN_STORE", str(BASE_DIR / "var" / "pins")).strip()
DELTAWEB_PIN_STORE = _pin_store if "://" in _pin_store or os.path.isabs(_pin_store) else str(BASE_DIR / _pin_store)

# Approved restores re-plan and commit on Spark ("spark"); "local" runs the pure planner in the
# worker instead (no JVM: small deployments and most tests). Both make the same plan.
DELTAWEB_RESTORE_ENGINE = env("DELTAWEB_RESTORE_ENGINE", "spark").strip().lower()
if DELTAWEB_RESTORE_ENGINE not in ("spark", "local"):
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured(f"DELTAWEB_RESTORE_ENGINE must be 'spark' or 'local', not {DELTAWEB_RESTORE_ENGINE!r}")
# A running restore touches its row this often; one silent for DELTAWEB_RESTORE_STUCK_MINUTES
# is taken for a dead worker and queued again (the beat task below; its txnId prevents a
# second commit).
DELTAWEB_RESTORE_HEARTBEAT_SECONDS = float(env("DELTAWEB_RESTORE_HEARTBEAT_SECONDS", "30"))
DELTAWEB_RESTORE_STUCK_MINUTES = float(env("DELTAWEB_RESTORE_STUCK_MINUTES", "10"))
# A running sync or data job touches its row this often; one silent for
# DELTAWEB_JOB_SILENT_MINUTES is failed with the reason, and a queued one never claimed in that
# time is sent again (a broker restarted without persistence loses its messages).
DELTAWEB_JOB_HEARTBEAT_SECONDS = float(env("DELTAWEB_JOB_HEARTBEAT_SECONDS", "15"))
DELTAWEB_JOB_SILENT_MINUTES = float(env("DELTAWEB_JOB_SILENT_MINUTES", "3"))
DELTAWEB_JOB_SWEEP_SECONDS = float(env("DELTAWEB_JOB_SWEEP_SECONDS", "60"))  # how often the beat looks

# deltaweb as a commit-owner (managed commits): the name tables record in their metadata,
# whether each ratified commit queues its backfill, and how often the beat backfills them all.
DELTAWEB_OWNER_NAME = env("DELTAWEB_OWNER_NAME", "deltaweb")
DELTAWEB_OWNER_AUTO_BACKFILL = env_bool("DELTAWEB_OWNER_AUTO_BACKFILL", True)
DELTAWEB_OWNER_BACKFILL_INTERVAL_SECONDS = float(env("DELTAWEB_OWNER_BACKFILL_INTERVAL_SECONDS", "30"))

# Alerts (the alerts app): where webhooks may go ("*" = any public host; a loopback or private
# address only when listed by name, address or CIDR), their timeout and payload bound, the
# retry schedule (exponential backoff with jitter within the window), the sweep's period, and
# the base of the links in deliveries.
DELTAWEB_WEBHOOK_ALLOWED_HOSTS = env_list("DELTAWEB_WEBHOOK_ALLOWED_HOSTS", "*")
DELTAWEB_WEBHOOK_TIMEOUT_SECONDS = float(env("DELTAWEB_WEBHOOK_TIMEOUT_SECONDS", "10"))
# a delivery being sent is held this long; one whose worker died is sent again after it (the
# same idempotency key: a receiver may see it twice, never lose it)
DELTAWEB_DELIVERY_LEASE_SECONDS = float(
    env("DELTAWEB_DELIVERY_LEASE_SECONDS", str(DELTAWEB_WEBHOOK_TIMEOUT_SECONDS * 3 + 60))
)
DELTAWEB_WEBHOOK_MAX_PAYLOAD_BYTES = int(env("DELTAWEB_WEBHOOK_MAX_PAYLOAD_BYTES", str(64 * 1024)))
DELTAWEB_ALERT_RETRY_BASE_SECONDS = float(env("DELTAWEB_ALERT_RETRY_BASE_SECONDS", "30"))
DELTAWEB_ALERT_RETRY_MAX_SECONDS = float(env("DELTAWEB_ALERT_RETRY_MAX_SECONDS", "3600"))
DELTAWEB_ALERT_RETRY_WINDOW_HOURS = float(env("DELTAWEB_ALERT_RETRY_WINDOW_HOURS", "24"))
DELTAWEB_ALERT_SWEEP_SECONDS = float(env("DELTAWEB_ALERT_SWEEP_SECONDS", "60"))
# how often the beat looks for tables silent beyond N times their usual commit interval
DELTAWEB_ALERT_SILENCE_CHECK_SECONDS = float(env("DELTAWEB_ALERT_SILENCE_CHECK_SECONDS", "300"))
DELTAWEB_BASE_URL = env("DELTAWEB_BASE_URL", "http://localhost:8000")
# E-mail (alert deliveries): SMTP by default; the secret comes from the environment only.
EMAIL_BACKEND = env("EMAIL_BACKEND", "django.core.mail.backends.smtp.EmailBackend")
EMAIL_HOST = env("EMAIL_HOST", "localhost")
EMAIL_PORT = int(env("EMAIL_PORT", "25"))
EMAIL_HOST_USER = env("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_TIMEOUT = float(env("EMAIL_TIMEOUT", "10"))
DEFAULT_FROM_EMAIL = env("DEFAULT_FROM_EMAIL", "deltaweb@localhost")
# Password reset by e-mail (/accounts/password_reset/): on only where e-mail is configured
# (EMAIL_HOST or EMAIL_BACKEND given), else every reset URL is a 404; DELTAWEB_PASSWORD_RESET=0
# turns it off anyway. Requests per client address and per address asked for.
DELTAWEB_PASSWORD_RESET = env_bool(
    "DELTAWEB_PASSWORD_RESET", bool(env("EMAIL_HOST").strip() or env("EMAIL_BACKEND").strip())
)
DELTAWEB_PASSWORD_RESET_RATE = env("DELTAWEB_PASSWORD_RESET_RATE", "5/hour")

# What every process must agree on (sign-in throttles, rate counts, reachability answers) lives
# in the "shared" cache: Redis when DELTAWEB_CACHE_URL is set (e.g. redis://127.0.0.1:6379/1),
# else a table of the database (created by a migration). A long log's reachability is computed
# by a worker after each sync and read by the web processes from there, never computed by them.
# The "default" cache holds what a process may keep for itself (rendered history pages, per
# synced state): in Redis too when it is configured, else in the process's memory.
# Redis down is a miss, never an error page (deltaweb/cache.py says what that means for the
# counters and once-only marks); the timeouts keep an unreachable host from holding a request.
DELTAWEB_CACHE_URL = env("DELTAWEB_CACHE_URL", "")
SHARED_CACHE_TABLE = "deltaweb_shared_cache"
if DELTAWEB_CACHE_URL:
    _redis = {
        "BACKEND": "deltaweb.cache.TolerantRedisCache",
        "LOCATION": DELTAWEB_CACHE_URL,
        "OPTIONS": {"socket_connect_timeout": 1.0, "socket_timeout": 2.0},
    }
    CACHES = {"default": {**_redis, "KEY_PREFIX": "deltaweb"}, "shared": {**_redis, "KEY_PREFIX": "deltaweb-shared"}}
else:
    CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
        "shared": {
            "BACKEND": "django.core.cache.backends.db.DatabaseCache",
            "LOCATION": SHARED_CACHE_TABLE,
            "OPTIONS": {"MAX_ENTRIES": 20000, "CULL_FREQUENCY": 4},
        },
    }

CELERY_BEAT_SCHEDULE = {
    "probe-due-tables": {"task": "tables.probe_due", "schedule": DELTAWEB_PROBE_TICK_SECONDS},
    "prune-operational-rows": {"task": "tables.prune_operational", "schedule": 86400.0},
    "rediscover-tables": {"task": "tables.rediscover", "schedule": 3600.0},
    "requeue-stuck-restores": {"task": "tables.requeue_stuck_restores", "schedule": 60.0},
    "sweep-silent-jobs": {"task": "tables.sweep_silent_jobs", "schedule": DELTAWEB_JOB_SWEEP_SECONDS},
    "sweep-pins": {"task": "tables.sweep_pins", "schedule": DELTAWEB_JOB_SWEEP_SECONDS},
    "chain-check-due": {"task": "tables.chain_check_due", "schedule": DELTAWEB_CHAIN_CHECK_TICK_SECONDS},
    "backfill-managed-tables": {
        "task": "tables.backfill_managed_tables",
        "schedule": float(DELTAWEB_OWNER_BACKFILL_INTERVAL_SECONDS),
    },
}
if DELTAWEB_ALERTS:
    CELERY_BEAT_SCHEDULE["alerts-sweep"] = {"task": "alerts.sweep", "schedule": DELTAWEB_ALERT_SWEEP_SECONDS}
    CELERY_BEAT_SCHEDULE["alerts-silence"] = {
        "task": "alerts.check_silence",
        "schedule": DELTAWEB_ALERT_SILENCE_CHECK_SECONDS,
    }

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "tables.api.base.tokens.RoleTokenAuthentication",
        "tables.api.base.tokens.CsrfSessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # DRF's JSON parser with the nesting bounded (tables/api/base/parsers.py), and its form parsers
    "DEFAULT_PARSER_CLASSES": [
        "tables.api.base.parsers.BoundedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.LimitOffsetPagination",
    "PAGE_SIZE": 50,
    "EXCEPTION_HANDLER": "tables.api.base.errors.exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "deltaweb API",
    "DESCRIPTION": "History, time travel, diffs and restores of Delta Lake tables.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # served from the drf-spectacular-sidecar package: the machines have no internet
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "ENUM_NAME_OVERRIDES": {
        "JobStatusEnum": "tables.models.JobStatus",
        "JobKindEnum": "tables.models.JobKind",
        "RestoreStatusEnum": "tables.models.RestoreStatus",
        "ColumnMappingModeEnum": "tables.api.versions.schema.MAPPING_MODES",
        "SchemaEventKindEnum": "tables.api.versions.schema.EVENT_KINDS",
        "TableSchemaEventKindEnum": "tables.api.versions.schema.TABLE_EVENT_KINDS",
        **({"SeverityEnum": "alerts.models.Severity"} if DELTAWEB_ALERTS else {}),
    },
}
