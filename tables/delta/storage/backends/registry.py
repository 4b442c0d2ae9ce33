"""The registry of object-store backends: what a `Backend` is, registering one, and finding one
by URL scheme or store kind. The backend modules import this, never the package (no cycle)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

from tables.delta.errors import StorageError

if TYPE_CHECKING:
    from tables.delta.storage.location import ObjectLocation

# (location, store config, client options, retry config) -> an obstore store for the bucket
StoreBuilder = Callable[["ObjectLocation", dict[str, Any], dict[str, Any], Mapping[str, Any]], Any]
# (location, the executor options, read only when needed) -> the authority of its Hadoop URIs
HadoopAuthority = Callable[["ObjectLocation", Callable[[], Mapping[str, Any]]], str]
# (location, options with lower-cased names, the authority of its Hadoop URIs) -> Hadoop configuration
HadoopConf = Callable[["ObjectLocation", Mapping[str, str], str], dict[str, str]]


@dataclass(frozen=True, slots=True)
class ObjectVersion:
    """One version of an object in a versioned bucket (or a delete marker), as listed."""

    key: str  # the object's path in its bucket
    version_id: str
    size: int
    etag: str  # without quotes
    last_modified: int  # ms
    is_latest: bool
    delete_marker: bool = False


class VersionedBucket(Protocol):
    """A bucket's object versions, for a store that keeps them (S3 with versioning): what
    recovery from noncurrent versions asks of a backend. Keys are object paths in the bucket."""

    def status(self) -> str | None:
        """The bucket's versioning: "Enabled", "Suspended", or None when never turned on."""
        ...

    def list_versions(self, prefix: str) -> Iterator[ObjectVersion]:
        """Every version and delete marker of every object under `prefix`, newest first per key."""
        ...

    def read_version(self, key: str, version_id: str, range: tuple[int, int] | None = None) -> bytes:
        """The bytes of one version (or `range` = (start, end) of them)."""
        ...

    def copy_back(self, key: str, source: ObjectVersion) -> dict[str, Any]:
        """Make `source` the current object of `key` again, only if `key` has no current
        object, and check the copy against `source`; a report of what was done."""
        ...


# (location, per-location options) -> the versions of the location's bucket
VersionedFactory = Callable[["ObjectLocation", Mapping[str, Any]], VersionedBucket]


def bucket_authority(loc: ObjectLocation, options: Callable[[], Mapping[str, Any]]) -> str:
    """The authority of a Hadoop URI for stores whose buckets are global names: the bucket."""
    return loc.bucket


def no_hadoop_conf(loc: ObjectLocation, opts: Mapping[str, str], authority: str) -> dict[str, str]:
    """No Hadoop configuration: the cluster's own credentials serve."""
    return {}


@dataclass(frozen=True, eq=False)
class Backend:
    """What one kind of object store is, for locations, options, credentials and Spark."""

    kind: str  # the store kind locations of its schemes have (ObjectLocation.kind)
    schemes: tuple[str, ...]  # the URL schemes it owns, as written (lower case)
    build: StoreBuilder
    # the schemes messages list when naming the accepted locations (all of them when empty)
    named_schemes: tuple[str, ...] = ()
    # schemes that are only another spelling of schemes[0] (S3's s3a): a location written with
    # one is stored, compared and discovered as the same location with schemes[0]
    spellings: tuple[str, ...] = ()
    container: str = "bucket"  # what messages call the bucket
    # whether a location may name the account in its host (abfss://container@account.host/...);
    # otherwise `user@` in a location is credentials and refused
    accounts: bool = False
    # option-name prefixes (aws_, azure_storage_, ...) under which client options are also written
    option_prefixes: tuple[str, ...] = ()
    # spellings of one store setting (after the prefix) -> the one name, for deduplication
    synonyms: Mapping[str, str] = field(default_factory=dict)
    allow_http_env: str | None = None  # the variable that allows plain HTTP from the environment
    secret_env: tuple[str, ...] = ()  # variables whose values are secrets (scrubbed from messages)
    # the environment's variables that configure its stores (a shared store is rebuilt when
    # one of them changes)
    env_prefixes: tuple[str, ...] = ()
    # the secret options an administrator may store for a location (credentials app): option
    # name -> its label
    secret_options: Mapping[str, str] = field(default_factory=dict)
    long_secrets: tuple[str, ...] = ()  # those of them a form gives a text area (a token, a JSON key)
    # an option the store takes in another form: (name, value, client options) -> its store
    # config, None when the option is not one (Azure's connection string)
    expand_option: Callable[[str, Any, dict[str, Any]], dict[str, Any] | None] | None = None
    # (store config, client options) -> the config with the environment's defaults beneath it
    env_config: Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]] | None = None
    # Spark: the variables forwarded to executors (whose environment need not hold them)
    forwarded_env: tuple[str, ...] = ()
    # Spark: (canonical names already given) -> more executor options the environment points
    # at rather than holds (a key file on the driver's disk)
    executor_extras: Callable[[set[str]], dict[str, Any]] | None = None
    # Spark's hadoop route: the connector's scheme and jar (None: the route refuses the store)
    hadoop_scheme: str | None = None
    hadoop_jar: str | None = None
    # whether the route turns the connector's FileSystem cache off (credentials per bucket or
    # account: a cached file system would keep another table's)
    hadoop_uncached: bool = False
    hadoop_authority: HadoopAuthority = bucket_authority
    # raises StorageError (without the location: the route names it) on options it cannot use
    hadoop_conf: HadoopConf = no_hadoop_conf
    # the bucket's object versions (recovery from noncurrent versions); None: not supported
    versioning: VersionedFactory | None = None

    def __repr__(self) -> str:
        return f"Backend({self.kind!r}, schemes={self.schemes!r})"


_by_kind: dict[str, Backend] = {}
_by_scheme: dict[str, Backend] = {}
_scheme_kinds: dict[str, str] = {}
# scheme as written -> the store kind it names (a live, read-only view of the registry)
SCHEME_KINDS: Mapping[str, str] = MappingProxyType(_scheme_kinds)


def register(backend: Backend) -> Backend:
    """Make `backend` serve its schemes; a kind or scheme another backend has is refused."""
    if backend.kind in _by_kind:
        raise ValueError(f"an object-store backend of kind {backend.kind!r} is registered already")
    taken = [s for s in backend.schemes if s in _by_scheme]
    if taken:
        raise ValueError(f"scheme(s) {', '.join(taken)} belong to another object-store backend")
    _by_kind[backend.kind] = backend
    for scheme in backend.schemes:
        _by_scheme[scheme] = backend
        _scheme_kinds[scheme] = backend.kind
    return backend


def unregister(kind: str) -> None:
    """Forget the backend of `kind` (tests registering one of their own); nothing when absent."""
    backend = _by_kind.pop(kind, None)
    if backend is not None:
        for scheme in backend.schemes:
            _by_scheme.pop(scheme, None)
            _scheme_kinds.pop(scheme, None)


def backend_for_scheme(scheme: str | None) -> Backend | None:
    """The backend owning a (lower-cased) URL scheme, None when no backend does."""
    return _by_scheme.get(scheme) if scheme else None


def backend_of(kind: str) -> Backend:
    """The backend of a store kind (ObjectLocation.kind)."""
    backend = _by_kind.get(kind)
    if backend is None:
        raise StorageError(f"no object-store backend of kind {kind[:40]!r}")
    return backend


def all_backends() -> tuple[Backend, ...]:
    """The registered backends, in registration order (the order messages list them in)."""
    return tuple(_by_kind.values())


def named_schemes() -> str:
    """The accepted object-store locations as messages list them: `s3://, az://, abfss://, gs://`."""
    return ", ".join(f"{s}://" for b in all_backends() for s in b.named_schemes or b.schemes)


def spelled(location: str) -> set[str]:
    """Every spelling of an object-store location in its canonical scheme (`s3://b/x` is also
    `s3a://b/x`): what an event or a listing may name it as."""
    scheme, sep, rest = location.partition("://")
    backend = backend_for_scheme(scheme.lower()) if sep else None
    if backend is None or scheme.lower() != backend.schemes[0]:
        return {location}
    return {location, *(f"{s}://{rest}" for s in backend.spellings)}
