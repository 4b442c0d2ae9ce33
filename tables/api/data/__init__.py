"""Data jobs on Spark: previews, change data, row diffs, row histories and the pages of their
results (`rows`); SQL at a version and its comparison at two versions (`query`)."""
