"""A parsed object-store location: what the object-store backend, the backends' registry and
the Spark routes all name a table root by (a module of its own so the backends, which the
parser consults, need nothing of the parser)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ObjectLocation:
    """A parsed object-store location: scheme as written, store kind, bucket, key prefix."""

    scheme: str
    kind: str  # the backend's kind: s3 | gs | az (tables/delta/storage/backends/)
    bucket: str  # bucket, or Azure container
    prefix: str  # the key prefix, no slash at either end ("" for the bucket root)
    account: str | None = None  # Azure storage account when the URI names it
    host: str | None = None  # the Azure host as written (abfss://container@<host>/...)

    @property
    def store_id(self) -> tuple[str, str, str | None]:
        return (self.kind, self.bucket, self.account)

    @property
    def root(self) -> str:
        """The canonical prefix URI confinement compares (s3a is s3)."""
        bucket = f"{self.bucket}@{self.account}" if self.account else self.bucket
        return f"{self.kind}://{bucket}/{self.prefix}".rstrip("/")

    def uri(self, path: str | None = None) -> str:
        """The URI of an object path in this bucket (the location's own prefix when None)."""
        netloc = f"{self.bucket}@{self.host}" if self.host else self.bucket
        key = self.prefix if path is None else path
        return f"{self.scheme}://{netloc}/{key}".rstrip("/") if key else f"{self.scheme}://{netloc}"

    def contains(self, store_id: tuple[str, str, str | None], path: str) -> bool:
        """Whether object `path` of the store `store_id` lies at or under this prefix."""
        kind, bucket, account = store_id
        if kind != self.kind or bucket != self.bucket:
            return False
        if self.account and account and self.account != account:
            return False
        return not self.prefix or path == self.prefix or path.startswith(self.prefix + "/")
