"""What every API concept is built on: authentication by token (`tokens`), query parameters
(`params`), bounded JSON bodies (`parsers`), roles (`permissions`), the error format
(`errors`), the shared serializer fields and the error body (`fields`), paging, path parameters
and the documented error responses (`common`)."""
