"""Restore requests: asking (with a dry-run plan), deciding, and running an approved one."""
