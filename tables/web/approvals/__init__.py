"""What is asked for and decided: pins and restore requests."""
