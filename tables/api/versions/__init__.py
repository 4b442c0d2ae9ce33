"""A table's versions, read from its log through the services: one version's summary and files
(`summary`), which versions can still be read (`reachability`), TIMESTAMP AS OF (`resolve`),
what changed between two versions (`diff`) and the schema's timeline (`schema`)."""
