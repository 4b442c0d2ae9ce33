"""A table's state at a version: replay, the snapshot, what a file's add says (deletion
vectors, column mapping, partitions), and two snapshots compared (diff, change data)."""
