"""The site as a whole, above both the pages (web/) and the API (api/), which never import each
other: the error handlers every request may end in, and the middleware every response passes."""
