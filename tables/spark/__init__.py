"""PySpark jobs: a session from settings, restore planning at scale, reading data at a version.

Jobs take plain arguments and return plain results; they never touch the Django ORM.
"""
