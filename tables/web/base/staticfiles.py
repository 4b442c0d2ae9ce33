"""Static files: hashed, compressed names after collectstatic, and plotly.js among them.

`StaticStorage` is WhiteNoise's compressed manifest storage (every file gets a content hash
in its name and .gz copies, so WhiteNoise serves it compressed and cached for ever), with the
hashed names under DEBUG too when the collected files are served (`make run`). Before
collectstatic has run — a fresh checkout, the test suite — a file not in the manifest keeps its
plain name and WhiteNoise serves it from the finders (WHITENOISE_USE_FINDERS), instead of the
page failing to render.

`PlotlyFinder` offers the installed plotly package's plotly.min.js as `vendor/plotly.min.js`,
so it is collected, hashed and compressed like our own files (4.8 MB, about 1.4 MB gzipped)
without being committed or fetched from a CDN.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.staticfiles.finders import BaseFinder
from django.core.files.storage import FileSystemStorage
from whitenoise.storage import CompressedManifestStaticFilesStorage

PLOTLY_NAME = "vendor/plotly.min.js"


URLS_KEPT = 1000


class StaticStorage(CompressedManifestStaticFilesStorage):
    manifest_strict = False  # a name missing from the manifest falls back instead of a 500

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._urls: dict[tuple[str | None, bool, bool], str] = {}

    def url(self, name: str | None, force: bool = False) -> str:
        # Where the collected files are what is served (WHITENOISE_USE_FINDERS off: `make run`,
        # the image), their hashed names are used under DEBUG too. Django keeps plain names under
        # DEBUG, so `make run` served plotly.min.js (4.8 MB) as `vendor/plotly.min.js` with
        # max-age=0, fetched again on every page; hashed, WhiteNoise marks it immutable, cached
        # for a year. With the finders on (a checkout, the tests) a source file changes under a
        # running process, and its plain name keeps serving the current file.
        force = force or not settings.WHITENOISE_USE_FINDERS
        # every page asks for the same few names, and each answer is fixed for the process
        # (the manifest is read once, at start; an uncollected file keeps its plain name):
        # a page's five lookups were a twentieth of its time
        key = (name, force, settings.DEBUG)
        found = self._urls.get(key)
        if found is None:
            found = super().url(name, force)
            if len(self._urls) < URLS_KEPT:
                self._urls[key] = found
        return found

    def hashed_name(self, name: str, content: Any = None, filename: str | None = None) -> str:
        try:
            return super().hashed_name(name, content, filename)
        except ValueError:
            if content is not None:  # collectstatic itself: a real error
                raise
            return name  # not collected (yet): the plain name, served from the finders


def plotly_file() -> Path | None:
    """plotly.min.js of the installed plotly package, or None."""
    spec = importlib.util.find_spec("plotly")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "package_data" / "plotly.min.js"
    return path if path.is_file() else None


class PlotlyFinder(BaseFinder):
    """Finds `vendor/plotly.min.js` in the installed plotly package (and nothing else there)."""

    def check(self, **kwargs: Any) -> list[Any]:
        return []

    def find(self, path: str, find_all: bool = False, **kwargs: Any) -> str | list[str]:
        find_all = find_all or kwargs.get("all", False)
        found = plotly_file() if path == PLOTLY_NAME else None
        if found is None:
            # [] as Django's own finders answer: finders.find() collects any other miss ("" or
            # None) as a match, and the development server failed on it (a 500, not a 404)
            return []
        return [str(found)] if find_all else str(found)

    def list(self, ignore_patterns: list[str] | None) -> Iterator[tuple[str, FileSystemStorage]]:
        found = plotly_file()
        if found is None:
            return
        storage = FileSystemStorage(location=str(found.parent))
        storage.prefix = "vendor"  # collectstatic puts the file under vendor/
        yield found.name, storage
