"""ISO 8601 dates and times for the admin and any Django-formatted value (the site's zone is
UTC, settings.TIME_ZONE, so the zone is written as Z)."""

DATE_FORMAT = "Y-m-d"
SHORT_DATE_FORMAT = "Y-m-d"
DATETIME_FORMAT = r"Y-m-d\TH:i:s\Z"
SHORT_DATETIME_FORMAT = r"Y-m-d\TH:i:s\Z"
TIME_FORMAT = r"H:i:s\Z"
YEAR_MONTH_FORMAT = "Y-m"
MONTH_DAY_FORMAT = "m-d"
DATE_INPUT_FORMATS = ["%Y-%m-%d"]
DATETIME_INPUT_FORMATS = ["%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d"]
FIRST_DAY_OF_WEEK = 1
