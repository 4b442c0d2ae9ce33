"""Which webhook URLs deltaweb may post to, so that a webhook cannot probe the internal
network: http or https only, no credentials in the URL, a host the setting
DELTAWEB_WEBHOOK_ALLOWED_HOSTS allows, and, unless that setting names the host or its address
explicitly, no loopback, private, link-local, multicast or reserved address.

The check runs when an endpoint is saved and again before every delivery, on the addresses the
name resolves to then; the delivery connects to the address that was checked (no second lookup
a rebinding DNS server could answer differently).
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings

from tables.services.errors import ServiceError, printable


@dataclass(frozen=True)
class Target:
    scheme: str
    host: str
    port: int
    path: str  # path and query, as sent
    address: str  # the checked IP address to connect to


def _refused(message: str) -> ServiceError:
    return ServiceError(message, "webhook_url_refused", 400)


def _allowed_entries() -> list[str]:
    return [h.strip().lower() for h in getattr(settings, "DELTAWEB_WEBHOOK_ALLOWED_HOSTS", ["*"]) if h.strip()]


def _listed(host: str, address: ipaddress._BaseAddress, entries: list[str]) -> bool:
    """Named explicitly: the host name, the address, or a network (CIDR) holding it."""
    for e in entries:
        if e == "*":
            continue
        if e == host:
            return True
        try:
            if address in ipaddress.ip_network(e, strict=False):
                return True
        except ValueError:
            continue
    return False


def _internal(address: ipaddress._BaseAddress) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return (
        address.is_private
        or address.is_loopback
        or address.is_link_local
        or address.is_multicast
        or address.is_reserved
        or address.is_unspecified
        or not address.is_global
    )


def parse(url: str) -> tuple[str, str, int, str]:
    """(scheme, host, port, path) of a webhook URL, or a clear error."""
    if not isinstance(url, str) or len(url) > 2000:
        raise _refused("A webhook URL is at most 2000 characters.")
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise _refused(f"Not a valid URL: {printable(url)}") from exc
    if parts.scheme not in ("http", "https"):
        raise _refused("A webhook URL must start with http:// or https://.")
    if parts.username or parts.password:
        raise _refused("A webhook URL may not carry a user name or password (the secret signs each delivery).")
    host = (parts.hostname or "").lower()
    if not host:
        raise _refused("A webhook URL needs a host.")
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return parts.scheme, host, port or (443 if parts.scheme == "https" else 80), path


def check(url: str) -> Target:
    """The target of `url` with the address to connect to, or a ServiceError saying why not."""
    scheme, host, port, path = parse(url)
    entries = _allowed_entries()
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise _refused(f"The webhook host {printable(host)} does not resolve.") from exc
    addresses = []
    for info in infos:
        try:
            addresses.append(ipaddress.ip_address(info[4][0].split("%", 1)[0]))
        except ValueError:
            continue
    if not addresses:
        raise _refused(f"The webhook host {printable(host)} does not resolve.")
    for address in addresses:
        listed = _listed(host, address, entries)
        if not listed and "*" not in entries:
            raise _refused(f"The webhook host {printable(host)} is not in DELTAWEB_WEBHOOK_ALLOWED_HOSTS.")
        if _internal(address) and not listed:
            raise _refused(
                f"The webhook host {printable(host)} resolves to an internal address ({address}); "
                "list it in DELTAWEB_WEBHOOK_ALLOWED_HOSTS to allow it."
            )
    return Target(scheme, host, port, path, str(addresses[0]))
