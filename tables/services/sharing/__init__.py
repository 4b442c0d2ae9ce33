"""Delta Sharing's use cases: recipients and their bearer tokens, the shares a recipient may
read, a shared table's versions, metadata, files and change data within its window of history,
the signed URLs its files are fetched through, and the record of every recipient query.

The protocol's HTTP side is `tables.api.sharing`; everything it answers is decided here, on
the core (`tables.delta`): snapshots, commit actions, TIMESTAMP AS OF with In-Commit Timestamps.
"""
