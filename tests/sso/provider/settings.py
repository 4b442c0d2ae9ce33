"""The test OpenID provider's settings: its own SQLite database (OIDC_PROVIDER_DB), users in
Django groups, the groups sent as the `groups` claim of the `groups` scope."""

import os

SECRET_KEY = "test-provider-only-secret-key-0123456789"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "oidc_provider",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]
ROOT_URLCONF = "tests.sso.provider.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [os.path.join(os.path.dirname(__file__), "templates")],
        "APP_DIRS": True,
        "OPTIONS": {"context_processors": ["django.template.context_processors.request"]},
    }
]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.environ["OIDC_PROVIDER_DB"]}}
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
USE_TZ = True
LOGIN_URL = "/accounts/login/"
SITE_URL = os.environ.get("OIDC_PROVIDER_URL", "")
OIDC_EXTRA_SCOPE_CLAIMS = "tests.sso.provider.claims.GroupsClaims"
OIDC_USERINFO = "tests.sso.provider.claims.userinfo"
