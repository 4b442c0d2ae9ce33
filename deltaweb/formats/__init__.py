"""The site's date formats for Django's own pages (the admin): ISO 8601 with its zone, as on
every other page (tables/templatetags/times.py), instead of the locale's "Nov. 28, 2026, 5:38 p.m."."""
