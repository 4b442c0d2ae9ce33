"""Job.kind gets its choices and the job's parameters their own field (they were kept in
`result["params"]`); existing data jobs have theirs copied over."""

from django.db import migrations, models


def copy_params(apps, schema_editor) -> None:
    Job = apps.get_model("tables", "Job")
    for job in Job.objects.exclude(result=None).iterator():
        params = (job.result or {}).get("params") if isinstance(job.result, dict) else None
        if isinstance(params, dict) and params:
            Job.objects.filter(pk=job.pk).update(params=params)


class Migration(migrations.Migration):
    dependencies = [
        ("tables", "0004_managed_commits"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="params",
            field=models.JSONField(blank=True, default=dict, help_text="what the job was asked to do"),
        ),
        migrations.AlterField(
            model_name="job",
            name="kind",
            field=models.CharField(
                choices=[("sync", "sync"), ("preview", "preview"), ("changes", "change data"), ("rowdiff", "row diff")],
                max_length=32,
            ),
        ),
        migrations.RunPython(copy_params, migrations.RunPython.noop),
    ]
