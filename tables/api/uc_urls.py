"""Routes of the Unity Catalog Delta API, included at /api/2.1/unity-catalog/ (tables.api.urls)."""

from django.urls import re_path

from . import uc_views as v

_NAME = r"[^/]+"
_TABLE = rf"^delta/v1/catalogs/(?P<catalog>{_NAME})/schemas/(?P<schema>{_NAME})/tables/(?P<table>{_NAME})"

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
]
