"""Clients of AWS's own services (SQS for push, Glue for discovery), kept off the object store.

In a deployment AWS_ENDPOINT_URL names the S3-compatible store (MinIO in docker-compose.yml),
and botocore would send every service there, Glue and SQS too. These clients ignore the
configured endpoints (that variable, AWS_ENDPOINT_URL_<SERVICE> and a config file's) and take
their own setting (DELTAWEB_SQS_ENDPOINT_URL, DELTAWEB_GLUE_ENDPOINT_URL) or AWS's regional one.
"""

from __future__ import annotations

from typing import Any


def client(service: str, region: str | None, endpoint: str = "") -> Any:
    """A boto3 client of `service` at `endpoint`, else AWS's own endpoint for the region."""
    import boto3
    from botocore.config import Config

    config = Config(ignore_configured_endpoint_urls=True)
    return boto3.client(service, region_name=region or None, endpoint_url=endpoint or None, config=config)
