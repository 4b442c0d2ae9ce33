"""Data jobs' pages: a version's and a comparison's rows read on Spark, one row's history."""
