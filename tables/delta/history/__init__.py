"""Across versions: commit timestamps (ICT), DESCRIBE HISTORY and the timeline, which versions
are reachable, growth."""
