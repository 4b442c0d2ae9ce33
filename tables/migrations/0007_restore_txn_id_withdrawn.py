"""Restore requests: the `withdrawn` status, and a random txn_id (the RESTORE commit's txnId)
filled for existing rows before it becomes unique (0008)."""

import uuid

from django.db import migrations, models


def fill_txn_ids(apps, schema_editor) -> None:
    RestoreRequest = apps.get_model("tables", "RestoreRequest")
    for pk in RestoreRequest.objects.filter(txn_id__isnull=True).values_list("pk", flat=True).iterator():
        RestoreRequest.objects.filter(pk=pk).update(txn_id=uuid.uuid4())


class Migration(migrations.Migration):
    dependencies = [
        ("tables", "0006_commit_log_expired"),
    ]

    operations = [
        migrations.AddField(
            model_name="restorerequest",
            name="txn_id",
            field=models.UUIDField(editable=False, null=True),
        ),
        migrations.RunPython(fill_txn_ids, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="restorerequest",
            name="status",
            field=models.CharField(
                choices=[
                    ("pending", "pending approval"),
                    ("stale", "stale: the table moved on, approve the new plan"),
                    ("withdrawn", "withdrawn by the requester"),
                    ("approved", "approved"),
                    ("rejected", "rejected"),
                    ("queued", "queued"),
                    ("running", "running"),
                    ("succeeded", "succeeded"),
                    ("failed", "failed"),
                    ("conflict", "conflict"),
                ],
                default="pending",
                max_length=16,
            ),
        ),
    ]
