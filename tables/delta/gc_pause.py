"""Pausing Python's cyclic garbage collector around work that makes many objects at once.

Listing a long log, scanning its file times and building a sync's batches make hundreds of
thousands of objects that live on and form no cycle; the collector walks all of them again
each time its thresholds trip (a tenth to a third of that work's time)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """The collector paused for the block (and in processes forked meanwhile); resumed after,
    unless something else had paused it."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
