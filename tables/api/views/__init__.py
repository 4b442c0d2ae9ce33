"""The REST API's views, one module per subject: tables, history, versions, restores and jobs
(`tables`); data jobs and their results (`data`); the schema's timeline (`schema`); files
removed outside the log (`removals`); discovery (`discovery`); deltaweb as a commit owner
(`owner`); sign-in and the API's own description (`auth`). Each parses the request, calls the
services and renders the answer."""
