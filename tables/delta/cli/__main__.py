"""`python -m tables.delta.cli`: the `delta` console script where the script is not installed."""

from __future__ import annotations

import sys

from tables.delta.cli import script

if __name__ == "__main__":  # not when a walk over the package imports this module
    sys.exit(script())
