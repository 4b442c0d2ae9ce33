"""Telling people: the notifications and deliveries an alert fans out to, their lifecycle, the signed webhook to a checked address."""
