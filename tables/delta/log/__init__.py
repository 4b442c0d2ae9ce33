"""The log's files: naming and listing, decoding JSON commits and checkpoints, commitInfo,
and writing a commit (put-if-absent)."""
