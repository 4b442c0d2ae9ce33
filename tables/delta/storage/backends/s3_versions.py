"""Object versions of an S3 bucket (versioning on), through boto3: listing them under a prefix,
reading one version, and copying a noncurrent version back to its key.

The client is built from what the obstore store of the same location is built from: the
location's stored options over the AWS_* environment (endpoint, region, keys, session token,
path or virtual-hosted style, unsigned requests), so a location that can be read can be
recovered with the same rights. No secret reaches a message: errors name the key and the
store's error code only.

A copy back never replaces a current object: it is a PUT with `If-None-Match: *` (S3's
conditional write), after listing the key's versions to find no current object. After it, the
key's versions are listed again: a version that appeared meanwhile from another writer fails
the copy (on a server that ignored the condition, it would be the object our copy covered;
nothing is deleted either way, the covered object stays a noncurrent version). The copy is
checked against the noncurrent version: its size; its ETag, when the store's ETag is the MD5
of the bytes (a single-part upload without KMS: the source's bytes were checked against its
own ETag as they were read); the SHA-256 the PUT carried, when the store keeps and returns it;
else by reading the new version back. Objects above a single PUT's limit (5 GiB) are not copied.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from tables.delta.errors import (
    ACCESS_CODES,
    BucketNotFoundError,
    ObjectStoreAccessError,
    RecoveryError,
    StorageError,
    StorageUnavailableError,
)
from tables.delta.storage.backends.registry import ObjectVersion

if TYPE_CHECKING:
    from tables.delta.storage.location import ObjectLocation

MAX_COPY_BYTES = 5 * 1024**3  # one PUT's limit on S3
SPOOL_BYTES = 64 << 20  # a copy's bytes stay in memory up to this, then in a temporary file
CHUNK = 1 << 20
_PLAIN_MD5 = re.compile(r"^[0-9a-f]{32}$")
_TRUE = ("1", "true", "yes", "on")
_ABSENT = ("404", "NoSuchKey", "NotFound", "NoSuchVersion")
_CONDITION_FAILED = ("PreconditionFailed", "ConditionalRequestConflict")


def _option(opts: Mapping[str, Any], names: tuple[str, ...], env: tuple[str, ...]) -> str | None:
    """A setting from the location's options (any spelling, any case), else the environment."""
    for name in names:
        value = opts.get(name)
        if value not in (None, ""):
            return str(value)
    return next((os.environ[e] for e in env if os.environ.get(e)), None)


def build_client(loc: ObjectLocation, options: Mapping[str, Any]) -> Any:
    """A boto3 S3 client for the bucket of `loc`, from the same settings obstore's store uses."""
    import boto3
    from botocore import UNSIGNED
    from botocore.config import Config

    opts = {str(k).strip().lower(): v for k, v in options.items()}
    endpoint = _option(
        opts, ("aws_endpoint_url", "aws_endpoint", "endpoint_url", "endpoint"), ("AWS_ENDPOINT_URL", "AWS_ENDPOINT")
    )
    region = _option(opts, ("aws_region", "aws_default_region", "region"), ("AWS_REGION", "AWS_DEFAULT_REGION"))
    virtual = _option(opts, ("aws_virtual_hosted_style_request", "virtual_hosted_style_request"), ())
    virtual = virtual or os.environ.get("AWS_VIRTUAL_HOSTED_STYLE_REQUEST", "")
    unsigned = _option(opts, ("aws_skip_signature", "skip_signature"), ("AWS_SKIP_SIGNATURE",)) or ""
    config = Config(
        # obstore's default is path-style requests; virtual-hosted when the settings say so
        s3={"addressing_style": "virtual" if virtual.lower() in _TRUE else "path"},
        retries={"max_attempts": 4, "mode": "standard"},
        connect_timeout=5,
        read_timeout=300,
        signature_version=UNSIGNED if unsigned.lower() in _TRUE else None,
    )
    # keys given for the location win; otherwise boto3's own chain (the environment first)
    creds = {
        "aws_access_key_id": _option(opts, ("aws_access_key_id", "access_key_id"), ()),
        "aws_secret_access_key": _option(opts, ("aws_secret_access_key", "secret_access_key"), ()),
        "aws_session_token": _option(opts, ("aws_session_token", "aws_token", "session_token", "token"), ()),
    }
    return boto3.session.Session().client(
        "s3",
        endpoint_url=endpoint,
        region_name=region or "us-east-1",
        config=config,
        **{k: v for k, v in creds.items() if v},
    )


def _code(exc: BaseException) -> tuple[str, int | None]:
    response = getattr(exc, "response", None) or {}
    code = str((response.get("Error") or {}).get("Code") or "")
    return code, (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")


class S3VersionedBucket:
    """The object versions of one S3 bucket (VersionedBucket of the backends' registry)."""

    def __init__(self, loc: ObjectLocation, options: Mapping[str, Any], client: Any | None = None) -> None:
        self.bucket = loc.bucket
        self.where = f"{loc.scheme}://{loc.bucket}"
        self._client = client if client is not None else build_client(loc, options)

    def __repr__(self) -> str:
        return f"S3VersionedBucket({self.where!r})"

    @contextmanager
    def _errors(self, key: str = "") -> Iterator[None]:
        """boto3's exceptions as the storage layer's named errors (no message of theirs kept:
        only the error code, which carries no secret)."""
        from botocore.exceptions import BotoCoreError, ClientError

        where = f"{self.where}/{key}" if key else self.where
        try:
            yield
        except ClientError as exc:
            code, status = _code(exc)
            if code in ACCESS_CODES or status in (401, 403):
                raise ObjectStoreAccessError(f"{where}: access denied by the object store ({code or status})") from None
            if code == "NoSuchBucket":
                raise BucketNotFoundError(f"{self.where}: the bucket '{self.bucket}' does not exist") from None
            if code in _ABSENT or status == 404:
                raise FileNotFoundError(2, "no such object version", where) from None
            if status is not None and status >= 500:
                raise StorageUnavailableError(f"{where}: the object store did not answer ({code or status})") from None
            raise StorageError(f"{where}: the object store refused the request ({code or status})") from None
        except BotoCoreError as exc:
            raise StorageUnavailableError(f"{where}: the object store did not answer ({type(exc).__name__})") from None

    # -- reading

    def status(self) -> str | None:
        with self._errors():
            return self._client.get_bucket_versioning(Bucket=self.bucket).get("Status") or None

    def list_versions(self, prefix: str) -> Iterator[ObjectVersion]:
        """Versions first, then delete markers, page by page; S3 lists a key's versions newest
        first, which is the order callers rely on among one key's versions."""
        with self._errors(prefix):
            pages = self._client.get_paginator("list_object_versions").paginate(Bucket=self.bucket, Prefix=prefix)
            for page in pages:
                for v in page.get("Versions") or ():
                    yield _version(v, False)
                for d in page.get("DeleteMarkers") or ():
                    yield _version(d, True)

    def key_versions(self, key: str) -> list[ObjectVersion]:
        """The versions of exactly `key` (a prefix listing names longer keys too)."""
        return [v for v in self.list_versions(key) if v.key == key]

    def read_version(self, key: str, version_id: str, range: tuple[int, int] | None = None) -> bytes:
        extra = {}
        if range is not None:
            start, end = range
            if end <= start:
                return b""
            extra["Range"] = f"bytes={start}-{end - 1}"
        with self._errors(key):
            return self._client.get_object(Bucket=self.bucket, Key=key, VersionId=version_id, **extra)["Body"].read()

    # -- holding and copying in place (pins)

    def object_lock(self) -> bool:
        """Whether the bucket was created with Object Lock (legal holds can keep a version)."""
        from botocore.exceptions import ClientError

        try:
            conf = self._client.get_object_lock_configuration(Bucket=self.bucket)
        except ClientError:
            return False  # ObjectLockConfigurationNotFoundError: a bucket without Object Lock
        return (conf.get("ObjectLockConfiguration") or {}).get("ObjectLockEnabled") == "Enabled"

    def hold_current(self, key: str) -> str:
        """A legal hold on the current version of `key`; its version id. The held version
        cannot be deleted, by VACUUM or anyone, until the hold is released: a delete only puts
        a delete marker above it."""
        with self._errors(key):
            version_id = self._client.head_object(Bucket=self.bucket, Key=key).get("VersionId") or ""
            if not version_id or version_id == "null":
                raise StorageError(f"{self.where}/{key}: no version id to hold (is versioning on?)")
            self._client.put_object_legal_hold(
                Bucket=self.bucket, Key=key, VersionId=version_id, LegalHold={"Status": "ON"}
            )
        return version_id

    def release(self, key: str, version_id: str) -> None:
        """Release the legal hold on one version (a removed pin)."""
        with self._errors(key):
            self._client.put_object_legal_hold(
                Bucket=self.bucket, Key=key, VersionId=version_id, LegalHold={"Status": "OFF"}
            )

    def server_copy(self, from_bucket: str, from_key: str, key: str) -> None:
        """CopyObject from another bucket of the same service into `key`: the bytes stay in the
        store (objects above a single copy's limit are refused)."""
        with self._errors(key):
            self._client.copy_object(Bucket=self.bucket, Key=key, CopySource={"Bucket": from_bucket, "Key": from_key})

    def copy_version(self, key: str, version_id: str, to_bucket: str, to_key: str) -> None:
        """CopyObject of one exact version of `key` into `to_bucket`/`to_key` (the same
        service): a held version that a VACUUM put a delete marker above, copied into a pin
        store, the bytes staying in the store."""
        with self._errors(key):
            self._client.copy_object(
                Bucket=to_bucket, Key=to_key, CopySource={"Bucket": self.bucket, "Key": key, "VersionId": version_id}
            )

    # -- copying back

    def copy_back(self, key: str, source: ObjectVersion) -> dict[str, Any]:
        """Put `source` (a noncurrent version of `key`) back as the current object of `key`,
        only if `key` has none; a report: outcome "copied" (with the new version id and how it
        was checked) or "present" (a current object with the same bytes was there already)."""
        if source.delete_marker or source.key != key:
            raise RecoveryError(f"{self.where}/{key}: {source.version_id} is not a version of this object")
        if source.size > MAX_COPY_BYTES:
            raise RecoveryError(f"{self.where}/{key}: {source.size} bytes, above a single copy's limit")
        before = self.key_versions(key)
        current = next((v for v in before if v.is_latest and not v.delete_marker), None)
        if current is not None:
            return self._present(key, source, current)
        with tempfile.SpooledTemporaryFile(SPOOL_BYTES) as spool:
            md5, sha = self._fetch(key, source, spool)
            spool.seek(0)
            put = self._put_if_absent(key, spool, source.size, md5, sha)
        if put is None:
            # refused: an object is there now, another writer's or our own earlier attempt's
            # (a retried PUT whose first answer was lost): its bytes tell which
            now = next((v for v in self.key_versions(key) if v.is_latest and not v.delete_marker), None)
            if now is None:
                raise RecoveryError(f"{self.where}/{key}: the conditional write was refused and no object is there")
            return self._present(key, source, now, md5.hex())
        return self._check(key, source, str(put.get("VersionId") or ""), before, md5.hex(), sha.hex())

    def _put_if_absent(self, key: str, body: Any, size: int, md5: bytes, sha: bytes) -> dict[str, Any] | None:
        """PUT with If-None-Match: *; None when the store refused it because the key exists."""
        from botocore.exceptions import ClientError

        try:
            return self._client.put_object(
                Bucket=self.bucket,
                Key=key,
                Body=body,
                ContentLength=size,
                ContentMD5=base64.b64encode(md5).decode(),  # the store refuses bytes that arrive changed
                ChecksumSHA256=base64.b64encode(sha).decode(),
                IfNoneMatch="*",
            )
        except ClientError as exc:
            code, status = _code(exc)
            if code in _CONDITION_FAILED or status in (409, 412):
                return None
            with self._errors(key):
                raise
        raise AssertionError("unreachable: _errors always raises")

    def _fetch(self, key: str, source: ObjectVersion, out: Any) -> tuple[bytes, bytes]:
        """The bytes of `source` into `out`, with their MD5 and SHA-256; checked to be that
        version's (its id, size, and its ETag when that is the MD5 of the bytes)."""
        md5, sha, size = hashlib.md5(usedforsecurity=False), hashlib.sha256(), 0
        with self._errors(key):
            got = self._client.get_object(Bucket=self.bucket, Key=key, VersionId=source.version_id)
            for chunk in got["Body"].iter_chunks(CHUNK):
                md5.update(chunk)
                sha.update(chunk)
                out.write(chunk)
                size += len(chunk)
        problems = []
        if str(got.get("VersionId") or source.version_id) != source.version_id:
            problems.append(f"the store answered version {got.get('VersionId')}")
        if size != source.size:
            problems.append(f"{size} bytes read, the version has {source.size}")
        if _PLAIN_MD5.match(source.etag) and md5.hexdigest() != source.etag:
            problems.append("the bytes read do not match the version's ETag")
        if problems:
            raise RecoveryError(f"{self.where}/{key}: reading version {source.version_id}: {'; '.join(problems)}")
        return md5.digest(), sha.digest()

    def _present(self, key: str, source: ObjectVersion, current: ObjectVersion, md5: str | None = None) -> dict:
        """A current object already holds `key`: fine when its bytes are the version's, else
        a RecoveryError (it is left as it is)."""
        same = current.size == source.size and (
            (current.etag == source.etag and _PLAIN_MD5.match(source.etag) is not None)
            or (md5 is not None and current.etag == md5)
            or self._digest(key, current.version_id) == self._digest(key, source.version_id)
        )
        if not same:
            raise RecoveryError(
                f"{self.where}/{key}: a current object (version {current.version_id}) holds other bytes than version "
                f"{source.version_id}; it was left as it is"
            )
        return _report(key, source, current.version_id, current.etag, "present", ["same bytes as the version"])

    def _digest(self, key: str, version_id: str) -> str:
        sha = hashlib.sha256()
        with self._errors(key):
            body = self._client.get_object(Bucket=self.bucket, Key=key, VersionId=version_id)["Body"]
            for chunk in body.iter_chunks(CHUNK):
                sha.update(chunk)
        return sha.hexdigest()

    def _check(
        self, key: str, source: ObjectVersion, version_id: str, before: list[ObjectVersion], md5: str, sha: str
    ) -> dict[str, Any]:
        """The copy, checked: it is the current version, no other writer's version appeared
        beside it, and its size and bytes are the source's."""
        after = self.key_versions(key)
        known = {v.version_id for v in before} | {version_id}
        others = [v.version_id for v in after if v.version_id not in known]
        with self._errors(key):
            head = self._client.head_object(Bucket=self.bucket, Key=key, ChecksumMode="ENABLED")
        etag = str(head.get("ETag") or "").strip('"')
        problems = []
        if others:
            problems.append(f"another writer wrote it meanwhile (version {', '.join(others[:3])})")
        if str(head.get("VersionId") or "") != version_id:
            problems.append(f"the current version is {head.get('VersionId')}, not the copy {version_id}")
        if int(head.get("ContentLength") or 0) != source.size:
            problems.append(f"the copy has {head.get('ContentLength')} bytes, the version {source.size}")
        checked = self._compare(key, version_id, etag, head.get("ChecksumSHA256"), md5, sha, problems)
        if problems:
            raise RecoveryError(f"{self.where}/{key}: the copy of version {source.version_id}: {'; '.join(problems)}")
        return {**_report(key, source, version_id, etag, "copied", checked), "sha256": sha}

    def _compare(
        self, key: str, version_id: str, etag: str, checksum: str | None, md5: str, sha: str, problems: list[str]
    ) -> list[str]:
        """How the copy's bytes were compared with the source's (problems appended)."""
        checked = []
        if _PLAIN_MD5.match(etag):
            checked.append("etag (md5)")
            if etag != md5:
                problems.append("its ETag is not the MD5 of the version's bytes")
        if checksum:
            checked.append("sha256 checksum")
            if base64.b64decode(checksum).hex() != sha:
                problems.append("its SHA-256 checksum is not the version's")
        if not checked:  # neither says anything of the bytes (KMS ETags, no checksum kept)
            checked.append("read back (sha256)")
            if self._digest(key, version_id) != sha:
                problems.append("the bytes read back are not the version's")
        return checked


def _version(item: Mapping[str, Any], delete_marker: bool) -> ObjectVersion:
    modified = item.get("LastModified")
    return ObjectVersion(
        key=str(item["Key"]),
        version_id=str(item.get("VersionId") or "null"),
        size=int(item.get("Size") or 0),
        etag=str(item.get("ETag") or "").strip('"'),
        last_modified=int(modified.timestamp() * 1000) if modified is not None else 0,
        is_latest=bool(item.get("IsLatest")),
        delete_marker=delete_marker,
    )


def _report(key: str, source: ObjectVersion, version_id: str, etag: str, outcome: str, checked: list[str]) -> dict:
    return {
        "key": key,
        "outcome": outcome,
        "sourceVersionId": source.version_id,
        "versionId": version_id,
        "size": source.size,
        "etag": etag,
        "sourceEtag": source.etag,
        "checkedBy": checked,
    }


versioned_bucket: Callable[[ObjectLocation, Mapping[str, Any]], S3VersionedBucket] = S3VersionedBucket
