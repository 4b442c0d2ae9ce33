"""Routes of the Unity Catalog Delta API, included at /api/2.1/unity-catalog/ (tables.api.urls).

Every path of openapi.yaml is a route here and every route but the document's own is in it
(tests/web/owner/test_uc_schemathesis.py checks both ways). The paths of UC's Delta API that deltaweb
does not implement answer 501, anything else under the prefix 404, both in UC's error shape:
the main API's catch-all (tables.api.urls) would answer in its own.
"""

from django.urls import re_path

from tables.api.base.errors import uc_not_found_view
from tables.api.catalog import views as v

_NAME = r"[^/]+"
_TABLE = rf"^delta/v1/catalogs/(?P<catalog>{_NAME})/schemas/(?P<schema>{_NAME})/tables/(?P<table>{_NAME})"

# UC's Delta API operations (its delta-api.yaml) that deltaweb does not serve; DELETE on a table
# (deleteTable) is a method of a served path, so it is a 405 there.
NOT_IMPLEMENTED = {
    "reportMetrics": rf"{_TABLE}/metrics$",
    "renameTable": rf"{_TABLE}/rename$",
    "getTemporaryPathCredentials": r"^delta/v1/temporary-path-credentials$",
}

urlpatterns = [
    re_path(r"^delta/v1/config$", v.ConfigView.as_view(), name="uc-config"),
    re_path(
        rf"^delta/v1/catalogs/(?P<catalog>{_NAME})/schemas/(?P<schema>{_NAME})/staging-tables$",
        v.StagingTablesView.as_view(),
        name="uc-staging-tables",
    ),
    re_path(
        rf"^delta/v1/staging-tables/(?P<table_id>{_NAME})/credentials$",
        v.StagingCredentialsView.as_view(),
        name="uc-staging-credentials",
    ),
    re_path(
        rf"^delta/v1/catalogs/(?P<catalog>{_NAME})/schemas/(?P<schema>{_NAME})/tables$",
        v.TablesView.as_view(),
        name="uc-tables",
    ),
    re_path(rf"{_TABLE}$", v.TableView.as_view(), name="uc-table"),
    re_path(rf"{_TABLE}/credentials$", v.TableCredentialsView.as_view(), name="uc-table-credentials"),
    re_path(r"^delta/preview/commits$", v.PreviewCommitsView.as_view(), name="uc-preview-commits"),
    re_path(r"^delta/openapi\.(?P<fmt>yaml|json)$", v.OpenApiView.as_view(), name="uc-openapi"),
    *(
        re_path(pattern, v.not_implemented_view, {"operation": operation}, name=f"uc-{operation}")
        for operation, pattern in NOT_IMPLEMENTED.items()
    ),
    # [\s\S], not ".": a path with an encoded newline (%0A) is still "anything"
    re_path(r"^[\s\S]*$", uc_not_found_view, name="uc-not-found"),
]
