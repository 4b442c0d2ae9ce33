"""What a Spark session is made of: its configuration (one declaration), a Spark Connect client
(and TLS in front of a server on a network), what a job asks of either kind of session (tags,
stages, cancel), what a master URL says, and the worker's wiring (its one session, a data job run
on it under its tag and cancelled, a restore planned on it). The process's session itself is
tables.spark.session."""
