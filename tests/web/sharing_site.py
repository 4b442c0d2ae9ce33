"""What the Delta Sharing tests share: tables registered and shared with windows, a recipient
with a token and its profile file, the official connector's table URL."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from tables.models import Recipient, Share, SharedTable, Table
from tables.services.sharing.recipients import issue_token, profile


@dataclass
class Site:
    base: str  # the live server's URL
    profile: Path
    token: str
    recipient: Recipient
    share: Share

    def url(self, name: str, schema: str = "default") -> str:
        return f"{self.profile}#{self.share.name}.{schema}.{name}"


def register(name: str, location: str | Path) -> Table:
    return Table.objects.create(name=name, slug=name, location=str(location))


def share_tables(base: str, tmp: Path, tables: dict[str, dict], share: str = "s1") -> Site:
    """A share holding each table (name -> {table, first_version, last_version, change_data}),
    a recipient of it with a fresh token, and its profile file under `tmp`."""
    found = Share.objects.create(name=share)
    for name, spec in tables.items():
        SharedTable.objects.create(share=found, name=name, **spec)
    recipient = Recipient.objects.create(name=f"partner-{share}")
    recipient.shares.add(found)
    token = issue_token(recipient)
    path = tmp / f"{share}.share"
    path.write_text(json.dumps(profile(recipient, token, f"{base}/delta-sharing/")))
    return Site(base, path, token, recipient, found)
