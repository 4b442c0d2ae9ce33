"""The S3 backend (AWS and S3-compatible servers): `s3://bucket/prefix` and `s3a://`, the AWS_*
environment, obstore's S3Store, hadoop-aws's per-bucket configuration for Spark, and the bucket's
object versions (s3_versions.py) for recovery from noncurrent versions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tables.delta.storage.backends.registry import Backend
from tables.delta.storage.backends.s3_versions import versioned_bucket

if TYPE_CHECKING:
    from tables.delta.storage.location import ObjectLocation


def build(loc: ObjectLocation, config: dict[str, Any], client: dict[str, Any], retry: Mapping[str, Any]) -> Any:
    """An S3Store for the bucket of `loc`."""
    from obstore.store import S3Store

    return S3Store(loc.bucket, config=config, client_options=client, retry_config=retry)


def hadoop_conf(loc: ObjectLocation, opts: Mapping[str, str], authority: str) -> dict[str, str]:
    """hadoop-aws's configuration for the bucket of `loc` (fs.s3a.bucket.<bucket>.*), so tables
    in other buckets keep their own credentials."""
    pre = f"fs.s3a.bucket.{loc.bucket}."
    out: dict[str, str] = {}

    def opt(*names: str) -> str | None:
        return next((opts[n] for n in names if opts.get(n)), None)

    key_id, secret = opt("aws_access_key_id", "access_key_id"), opt("aws_secret_access_key", "secret_access_key")
    token = opt("aws_session_token", "aws_token", "session_token", "token")
    if key_id and secret:
        out[pre + "access.key"] = key_id
        out[pre + "secret.key"] = secret
        provider = "TemporaryAWSCredentialsProvider" if token else "SimpleAWSCredentialsProvider"
        out[pre + "aws.credentials.provider"] = f"org.apache.hadoop.fs.s3a.{provider}"
        if token:
            out[pre + "session.token"] = token
    region = opt("aws_region", "aws_default_region", "region")
    if region:
        out[pre + "endpoint.region"] = region
    endpoint = opt("aws_endpoint_url", "aws_endpoint", "endpoint_url", "endpoint")
    if endpoint:  # an S3-compatible server: path-style requests, plain HTTP when it says so
        out[pre + "endpoint"] = endpoint
        out[pre + "path.style.access"] = "true"
        out[pre + "connection.ssl.enabled"] = str(endpoint.startswith("https://")).lower()
    return out


BACKEND = Backend(
    kind="s3",
    schemes=("s3", "s3a"),
    spellings=("s3a",),  # hadoop-aws's name for the same bucket
    build=build,
    container="bucket",
    option_prefixes=("aws_",),
    env_prefixes=("AWS_",),
    secret_options={
        "aws_access_key_id": "S3 access key id",
        "aws_secret_access_key": "S3 secret access key",
        "aws_session_token": "S3 session token",
    },
    long_secrets=("aws_session_token",),
    synonyms={"endpoint_url": "endpoint", "default_region": "region", "token": "session_token"},
    allow_http_env="AWS_ALLOW_HTTP",
    secret_env=("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"),
    forwarded_env=(
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "AWS_ENDPOINT_URL",
        "AWS_ENDPOINT",
        "AWS_ALLOW_HTTP",
        "AWS_VIRTUAL_HOSTED_STYLE_REQUEST",
        "AWS_REQUEST_PAYER",
        "AWS_SKIP_SIGNATURE",
    ),
    hadoop_scheme="s3a",
    hadoop_jar="hadoop-aws",
    hadoop_uncached=True,
    hadoop_conf=hadoop_conf,
    versioning=versioned_bucket,
)
