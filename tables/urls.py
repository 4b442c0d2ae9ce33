"""Browser UI routes (mounted at / by deltaweb.urls)."""

from django.urls import path, re_path

from tables.web.account import page as account_views
from tables.web.approvals import pins as pin_views
from tables.web.approvals import restores as restore_views
from tables.web.catalog import discovery as discovery_views
from tables.web.catalog import table_list as views
from tables.web.data import row_history as row_history_views
from tables.web.data import rows as rows_views
from tables.web.tabs import compare as compare_views
from tables.web.tabs import history as history_views
from tables.web.tabs import overview as overview_views
from tables.web.tabs import query as query_views
from tables.web.tabs import schema as schema_views
from tables.web.tabs import versions as versions_views

app_name = "tables"

urlpatterns = [
    path("", views.table_list, name="table_list"),
    path("tables/register/", views.register, name="register"),
    path("tables/register/check/", views.register_check, name="register_check"),
    path("tables/discover/", discovery_views.discover, name="discover"),
    path("account/", account_views.account, name="account"),
    path("t/<slug:slug>/", overview_views.table_detail, name="table_detail"),
    path("t/<slug:slug>/history/", history_views.table_history, name="table_history"),
    re_path(
        r"^t/(?P<slug>[-a-zA-Z0-9_]+)/history\.(?P<fmt>csv|parquet)$",
        history_views.history_download,
        name="history_download",
    ),
    re_path(
        r"^t/(?P<slug>[-a-zA-Z0-9_]+)/file-removals\.(?P<fmt>csv|parquet)$",
        history_views.file_removals_download,
        name="file_removals_download",
    ),
    path("t/<slug:slug>/audit-export/", history_views.audit_download, name="audit_download"),
    path("t/<slug:slug>/charts/", overview_views.table_charts_page, name="table_charts_page"),
    path("t/<slug:slug>/versions/", versions_views.table_versions, name="table_versions"),
    path("t/<slug:slug>/schema/", schema_views.table_schema, name="table_schema"),
    path("t/<slug:slug>/query/", query_views.table_query, name="table_query"),
    path("t/<slug:slug>/query/run/", query_views.query_run, name="query_run"),
    path("t/<slug:slug>/query/compare/", query_views.query_compare, name="query_compare"),
    re_path(
        r"^t/(?P<slug>[-a-zA-Z0-9_]+)/query/(?P<pk>[0-9]{1,18})\.(?P<fmt>csv|parquet)$",
        query_views.query_download,
        name="query_download",
    ),
    path("t/<slug:slug>/restores/", overview_views.table_restores, name="table_restores"),
    path("t/<slug:slug>/sync/", views.sync_now, name="sync_now"),
    path("t/<slug:slug>/charts.json", overview_views.table_charts_json, name="table_charts"),
    path("t/<slug:slug>/v/<int:version>/", versions_views.version_detail, name="version_detail"),
    path("t/<slug:slug>/v/<int:version>/pin/", pin_views.pin_new, name="pin_new"),
    path("pins/<int:pk>/unpin/", pin_views.pin_unpin, name="pin_unpin"),
    path("pins/<int:pk>/withdraw/", pin_views.pin_withdraw, name="pin_withdraw"),
    path("pins/<int:pk>/approve/", pin_views.pin_approve, name="pin_approve"),
    path("pins/<int:pk>/reject/", pin_views.pin_reject, name="pin_reject"),
    path("t/<slug:slug>/diff/", compare_views.diff_view, name="diff"),
    path("t/<slug:slug>/diff/rows/", rows_views.diff_rows_start, name="diff_rows"),
    path("t/<slug:slug>/v/<int:version>/preview/", rows_views.preview_start, name="version_preview"),
    path("t/<slug:slug>/row/", row_history_views.row_history_page, name="row_history"),
    path("t/<slug:slug>/row/start/", row_history_views.row_history_start, name="row_history_start"),
    path("t/<slug:slug>/freeze/", overview_views.managed_freeze, name="managed_freeze"),
    path("t/<slug:slug>/restore/", restore_views.restore_new, name="restore_new"),
    path("restores/", restore_views.restore_list, name="restore_list"),
    path("restores/<int:pk>/", restore_views.restore_detail, name="restore_detail"),
    path("restores/<int:pk>/approve/", restore_views.restore_approve, name="restore_approve"),
    path("restores/<int:pk>/withdraw/", restore_views.restore_withdraw, name="restore_withdraw"),
    path("restores/<int:pk>/reject/", restore_views.restore_reject, name="restore_reject"),
    path("restores/<int:pk>.json", restore_views.restore_status, name="restore_status"),
    path("jobs/<int:pk>.json", views.job_status, name="job_status"),
    path("jobs/<int:pk>/cancel/", views.job_cancel, name="job_cancel"),
    path("vendor/plotly.min.js", views.plotly_js, name="plotly_js"),
    path("favicon.ico", views.favicon, name="favicon"),
]
