"""Sign-in and the API's own description: the throttled token endpoint, and the OpenAPI schema
and Swagger UI (sign-in required unless DELTAWEB_PUBLIC_SCHEMA)."""

from __future__ import annotations

from django.conf import settings as django_settings
from django.contrib.auth.views import redirect_to_login
from django.core.cache import caches
from drf_spectacular.utils import OpenApiResponse, extend_schema
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework import serializers
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.exceptions import Throttled, ValidationError
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.throttling import ScopedRateThrottle, SimpleRateThrottle

from tables.api.base.fields import ErrorSerializer
from tables.api.base.parsers import BoundedJSONParser
from tables.services.access import api_tokens
from tables.services.access.signin_throttle import client_address, login_refused_for, record_login

# --- sign-in and the schema -----------------------------------------------------------------


class TokenRequestSerializer(serializers.Serializer):
    username = serializers.CharField(min_length=1, max_length=150)
    password = serializers.CharField(min_length=1, max_length=4096, style={"input_type": "password"})


class TokenSerializer(serializers.Serializer):
    token = serializers.CharField(help_text="Send as 'Authorization: Token <token>'.")


class TokenRateThrottle(ScopedRateThrottle):
    """Requests per client (IP, or user once signed in) to the token endpoint, at the rate of
    settings.DELTAWEB_TOKEN_RATE read per request (so a deployment or a test can change it)."""

    scope = "token"
    cache = caches["shared"]  # every web process counts the same requests

    def get_rate(self) -> str:
        return django_settings.DELTAWEB_TOKEN_RATE

    def allow_request(self, request, view) -> bool:
        # ScopedRateThrottle reads the scope off the view; this throttle has its own
        self.rate = self.get_rate()
        self.num_requests, self.duration = self.parse_rate(self.rate)
        return SimpleRateThrottle.allow_request(self, request, view)

    def get_ident(self, request) -> str:
        # the sign-in form's rule: X-Forwarded-For only from DELTAWEB_TRUSTED_PROXIES proxies
        return client_address(request)


class TokenView(ObtainAuthToken):
    """POST a username and password, get the user's API token; throttled per client."""

    throttle_classes = [TokenRateThrottle]
    parser_classes = [BoundedJSONParser, FormParser, MultiPartParser]

    @extend_schema(
        summary="Exchange a username and password for the user's API token",
        request=TokenRequestSerializer,
        responses={
            200: TokenSerializer,
            400: OpenApiResponse(ErrorSerializer, description="Missing fields or wrong credentials"),
            401: OpenApiResponse(ErrorSerializer, description="A malformed or unknown Authorization header"),
            429: OpenApiResponse(ErrorSerializer, description="Too many requests; retry after Retry-After"),
        },
        auth=[],
    )
    def post(self, request, *args, **kwargs):
        """Send `Authorization: Token <token>` with every API request. At most DELTAWEB_TOKEN_RATE
        requests per client (default 10 a minute); more answer 429 with Retry-After. Failed
        passwords count with the sign-in form's, per address and normalised username."""
        data = request.data if isinstance(request.data, dict) else {}
        username = data.get("username") if isinstance(data.get("username"), str) else ""
        window = login_refused_for(request, username)
        if window is not None:
            raise Throttled(wait=window)
        serializer = self.get_serializer(data=request.data)
        try:
            serializer.is_valid(raise_exception=True)
        except ValidationError:
            record_login(request, username, False)
            raise
        record_login(request, username, True)
        # the user's token while valid, else a new one (DELTAWEB_TOKEN_DAYS)
        return Response({"token": api_tokens.for_sign_in(serializer.validated_data["user"]).key})


def _schema_permissions() -> list:
    # read per request, so that DELTAWEB_PUBLIC_SCHEMA takes effect without a re-import
    return [AllowAny()] if django_settings.DELTAWEB_PUBLIC_SCHEMA else [IsAuthenticated()]


class _JsonErrors:
    """Errors of a view whose renderers are YAML or HTML still answer the API's JSON error."""

    def handle_exception(self, exc):
        response = super().handle_exception(exc)
        self.request.accepted_renderer, self.request.accepted_media_type = JSONRenderer(), "application/json"
        return response


class SchemaView(_JsonErrors, SpectacularAPIView):
    """The OpenAPI schema: for signed-in users unless DELTAWEB_PUBLIC_SCHEMA=1."""

    def get_permissions(self):
        return _schema_permissions()


class DocsView(_JsonErrors, SpectacularSwaggerSplitView):
    """Swagger UI, its init script a separate file (the CSP allows no inline script). A browser
    that is not signed in is sent to the sign-in form, an API client gets the 401."""

    def get_permissions(self):
        return _schema_permissions()

    def permission_denied(self, request, message=None, code=None):
        if not request.user.is_authenticated and "text/html" in request.META.get("HTTP_ACCEPT", ""):
            raise _SignInRedirect(request.get_full_path())
        super().permission_denied(request, message, code)

    def handle_exception(self, exc):
        if isinstance(exc, _SignInRedirect):
            return redirect_to_login(exc.next_url)
        return super().handle_exception(exc)

    def finalize_response(self, request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        # Swagger UI styles itself inline; its scripts stay limited to our own files
        policy = django_settings.DELTAWEB_CSP
        if policy and "style-src 'self';" in policy:
            response["Content-Security-Policy"] = policy.replace(
                "style-src 'self';", "style-src 'self' 'unsafe-inline';"
            )
        return response


class _SignInRedirect(Exception):
    def __init__(self, next_url: str) -> None:
        super().__init__(next_url)
        self.next_url = next_url
