"""Admin console: restore approvals, pin removals and table management, one module per concept
(catalog, history, jobs, owner, access, restores, pins, sharing; `base.py` what they share).

Approvals go through the same use cases as the UI and the API, so the server's rules hold here
too. Importing this package registers every admin."""

from tables.admin import (
    access,  # noqa: F401
    catalog,  # noqa: F401
    history,  # noqa: F401
    jobs,  # noqa: F401
    owner,  # noqa: F401
    pins,  # noqa: F401
    restores,  # noqa: F401
    sharing,  # noqa: F401
)
