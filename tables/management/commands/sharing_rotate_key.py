"""`manage.py sharing_rotate_key`: a new key for the file URLs of shared local tables."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from tables.services.sharing.errors import SharingError
from tables.services.sharing.file_urls import rotate_key


class Command(BaseCommand):
    help = (
        "Replace the key that signs Delta Sharing file URLs (var/sharing-url.key): every URL "
        "issued before stops working; recipients query again for new ones."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            rotate_key()
        except SharingError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write("the file-URL key is new: URLs issued before it are refused")
