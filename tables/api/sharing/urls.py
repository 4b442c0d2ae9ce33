"""The protocol's routes under /delta-sharing/ (deltaweb/urls.py); any other path there is the
protocol's 404."""

from django.urls import path, re_path

from tables.api.sharing import views

TABLE = "shares/<str:share>/schemas/<str:schema>/tables/<str:table>"

urlpatterns = [
    path("shares", views.list_shares, name="sharing_shares"),
    path("shares/<str:share>", views.get_share, name="sharing_share"),
    path("shares/<str:share>/schemas", views.list_schemas, name="sharing_schemas"),
    path("shares/<str:share>/schemas/<str:schema>/tables", views.list_tables, name="sharing_tables"),
    path("shares/<str:share>/all-tables", views.list_all_tables, name="sharing_all_tables"),
    path(f"{TABLE}/version", views.table_version, name="sharing_table_version"),
    path(TABLE, views.table_version, name="sharing_table_head"),
    path(f"{TABLE}/metadata", views.table_metadata, name="sharing_metadata"),
    path(f"{TABLE}/query", views.table_query, name="sharing_query"),
    path(f"{TABLE}/changes", views.table_changes, name="sharing_changes"),
    path("files/<str:payload>", views.shared_file, name="sharing_file"),
    re_path(r"^(?P<rest>.*)$", views.not_found, name="sharing_not_found"),
]
