"""A table's history from the synced cache: the commits as DESCRIBE HISTORY shows them and
their file export (`commits`), the timestamp timeline (`timeline`), the signed audit export
(`audit`) and the files removed outside the log (`removals`)."""
