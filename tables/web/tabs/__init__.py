"""The table page's tabs, each its own URL inside one frame (``frame.py``)."""
