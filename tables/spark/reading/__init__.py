"""Reading a version's rows on Spark: the core picks and confines the files, Spark reads the
Parquet (local files, object stores through the Python data source or Hadoop's connectors),
names quoted and paths escaped."""
