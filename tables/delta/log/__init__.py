"""The log's files: naming and listing, decoding JSON commits and checkpoints, commitInfo, and
In-Commit Timestamps as a table declares them (writing a commit is tables.delta.write)."""
