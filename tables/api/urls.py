"""Routes under /api/ (namespace "api"): tables, jobs, restores, token, OpenAPI schema and Swagger UI."""

from django.urls import include, path, re_path
from rest_framework.routers import SimpleRouter

from tables.api.auth import DocsView, SchemaView, TokenView
from tables.api.base.errors import not_found_view
from tables.api.data import query as query_views
from tables.api.data.rows import (
    ChangesView,
    JobCancelView,
    JobResultsView,
    RowDiffView,
    RowHistoryView,
    VersionRowsView,
)
from tables.api.discovery import DiscoverView
from tables.api.history.audit import AuditExportView
from tables.api.history.removals import VacuumsExportView, VacuumsView
from tables.api.jobs import JobViewSet
from tables.api.owner import OwnerBackfillView, OwnerCommitsView
from tables.api.pins import PinDecisionView, PinUnpinView, PinView, PinWithdrawView, TablePinsView
from tables.api.restores import RestoreViewSet
from tables.api.tables import ApiRootView, TableViewSet
from tables.api.versions.schema import SchemaDiffView, SchemaTimelineView, TableSchemaView

app_name = "api"

router = SimpleRouter()
router.register("tables", TableViewSet, basename="table")
router.register("jobs", JobViewSet, basename="job")
router.register("restores", RestoreViewSet, basename="restore")

urlpatterns = [
    path("", ApiRootView.as_view(), name="root"),
    path("auth/token/", TokenView.as_view(), name="token"),
    path("schema/", SchemaView.as_view(), name="schema"),
    path("docs/", DocsView.as_view(url_name="api:schema"), name="docs"),
    *router.urls,
    path("discover/", DiscoverView.as_view(), name="discover"),
    # data on Spark: previews, change data, keyed row diffs, row histories and the pages of their results
    re_path(
        r"^tables/(?P<id>[^/]+)/versions/(?P<version>[^/]+)/rows/$", VersionRowsView.as_view(), name="version-rows"
    ),
    re_path(r"^tables/(?P<id>[^/]+)/changes/$", ChangesView.as_view(), name="table-changes"),
    re_path(r"^tables/(?P<id>[^/]+)/diff/rows/$", RowDiffView.as_view(), name="table-diff-rows"),
    re_path(r"^tables/(?P<id>[^/]+)/row-history/$", RowHistoryView.as_view(), name="table-row-history"),
    re_path(r"^jobs/(?P<id>[0-9]{1,18})/results/$", JobResultsView.as_view(), name="job-results"),
    # SQL at a version: a query, the same query at two versions and their comparison, one's queries
    re_path(r"^tables/(?P<id>[^/]+)/query/$", query_views.QueryView.as_view(), name="table-query"),
    re_path(r"^tables/(?P<id>[^/]+)/query/compare/$", query_views.CompareView.as_view(), name="table-query-compare"),
    re_path(
        r"^queries/compare/(?P<a>[0-9]{1,18})/(?P<b>[0-9]{1,18})/$",
        query_views.ComparisonView.as_view(),
        name="query-comparison",
    ),
    path("queries/", query_views.QueryHistoryView.as_view(), name="queries"),
    re_path(r"^jobs/(?P<id>[0-9]{1,18})/cancel/$", JobCancelView.as_view(), name="job-cancel"),
    # the schema's timeline, read from the log
    re_path(r"^tables/(?P<id>[^/]+)/schema/$", TableSchemaView.as_view(), name="table-schema"),
    re_path(r"^tables/(?P<id>[^/]+)/schema/timeline/$", SchemaTimelineView.as_view(), name="table-schema-timeline"),
    re_path(r"^tables/(?P<id>[^/]+)/schema/diff/$", SchemaDiffView.as_view(), name="table-schema-diff"),
    # files removed outside the log (VACUUM), as the sync's looks found them
    re_path(r"^tables/(?P<id>[^/]+)/vacuums/$", VacuumsView.as_view(), name="table-vacuums"),
    re_path(
        r"^tables/(?P<id>[^/]+)/vacuums/(?P<fmt>csv|parquet)/$",
        VacuumsExportView.as_view(),
        name="table-vacuums-export",
    ),
    # the signed audit export of a version range (the History tab's download)
    re_path(r"^tables/(?P<id>[^/]+)/audit-export/$", AuditExportView.as_view(), name="table-audit-export"),
    # pins: versions kept in the pin store through any VACUUM and log cleanup
    re_path(r"^tables/(?P<id>[^/]+)/pins/$", TablePinsView.as_view(), name="table-pins"),
    re_path(r"^pins/(?P<pk>[0-9]{1,18})/$", PinView.as_view(), name="pin"),
    re_path(r"^pins/(?P<pk>[0-9]{1,18})/unpin/$", PinUnpinView.as_view(), name="pin-unpin"),
    re_path(r"^pins/(?P<pk>[0-9]{1,18})/withdraw/$", PinWithdrawView.as_view(), name="pin-withdraw"),
    re_path(r"^pins/(?P<pk>[0-9]{1,18})/approve/$", PinDecisionView.as_view(approve=True), name="pin-approve"),
    re_path(r"^pins/(?P<pk>[0-9]{1,18})/reject/$", PinDecisionView.as_view(approve=False), name="pin-reject"),
    # the commit-owner API (RestOwnerClient's paths, without a trailing slash)
    re_path(r"^owner/tables/(?P<table_id>[^/]+)/commits$", OwnerCommitsView.as_view(), name="owner-commits"),
    re_path(r"^owner/tables/(?P<table_id>[^/]+)/backfill$", OwnerBackfillView.as_view(), name="owner-backfill"),
    # the Unity Catalog Delta API for the catalogManaged tables deltaweb owns
    path("2.1/unity-catalog/", include("tables.api.catalog.urls")),
    # anything else under /api/ answers in the API's error format
    # [\s\S], not ".": a path with an encoded newline (%0A) is still "anything"
    re_path(r"^[\s\S]*$", not_found_view),
]
