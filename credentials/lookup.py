"""Which stored credential applies to a location: the one whose prefix is the longest that
contains it (s3a:// matches s3:// prefixes), else none and the environment's variables apply."""

from __future__ import annotations

from credentials.crypto import CredentialsKeyError
from credentials.models import StorageCredential
from tables.delta.errors import StorageError
from tables.delta.storage.objectstore_config import is_object_location, parse_location


def canonical_prefix(prefix: str) -> str:
    """The prefix as confinement compares it (scheme family, no trailing slash); StorageError
    when it is not an object-store location."""
    return parse_location(prefix).root


def matching(location: str) -> StorageCredential | None:
    """The credential with the longest prefix containing `location`, None if there is none."""
    if not is_object_location(location):
        return None
    loc = parse_location(location)
    best: StorageCredential | None = None
    best_len = -1
    for cred in StorageCredential.objects.filter(prefix__startswith=f"{loc.kind}://{loc.bucket}"):
        p = parse_location(cred.prefix)
        if p.contains(loc.store_id, loc.prefix) and len(p.prefix) > best_len:
            best, best_len = cred, len(p.prefix)
    return best


def options_for(location: str) -> dict[str, str] | None:
    """The stored options for a location (the storage layer's options provider), or None."""
    cred = matching(location)
    if cred is None:
        return None
    try:
        return cred.storage_options()
    except CredentialsKeyError as exc:
        raise StorageError(f"the stored credentials for {cred.prefix} cannot be used: {exc}") from None
