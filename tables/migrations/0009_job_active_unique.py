"""At most one active (queued or running) job per kind, table and parameters.

Jobs get a params_hash (a digest of their parameters); existing rows are filled. If older
rows already hold duplicates among active jobs, only the newest keeps its hash, so the rule
can be added without touching their status (the others simply stay outside the rule).
"""

import hashlib
import json

from django.db import migrations, models

ACTIVE = ("queued", "running")


def digest(params):
    text = json.dumps(params or {}, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def fill_hashes(apps, schema_editor):
    Job = apps.get_model("tables", "Job")
    seen = set()
    for job in Job.objects.order_by("-pk").iterator():
        value = digest(job.params)
        if job.status in ACTIVE:
            key = (job.kind, job.table_id, value)
            if key in seen:
                continue  # an older duplicate of an active job: left out of the rule
            seen.add(key)
        Job.objects.filter(pk=job.pk).update(params_hash=value)


class Migration(migrations.Migration):
    dependencies = [
        ("tables", "0008_restore_txn_id_unique"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="params_hash",
            field=models.CharField(blank=True, default="", editable=False, max_length=64),
        ),
        migrations.RunPython(fill_hashes, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="job",
            constraint=models.UniqueConstraint(
                condition=models.Q(("status__in", ["queued", "running"]), models.Q(("params_hash", ""), _negated=True)),
                fields=("kind", "table", "params_hash"),
                name="job_active_unique",
            ),
        ),
    ]
