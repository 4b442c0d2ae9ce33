"""English: the ISO formats of deltaweb.formats."""
