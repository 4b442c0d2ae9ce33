"""Which versions of a table can still be read or restored, and why not: computed (`compute.py`)
and kept as runs every process can read (`runs.py`)."""
