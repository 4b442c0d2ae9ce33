"""Tables registered as `s3a://bucket/x` are stored as `s3://bucket/x`, the one spelling
registration, discovery and events now use; a table whose `s3://` twin is registered already
keeps its row as it was (an administrator forgets one of the two)."""

from django.db import migrations


def spell_s3(apps, schema_editor) -> None:
    Table = apps.get_model("tables", "Table")
    taken = set(Table.objects.filter(location__startswith="s3://").values_list("location", flat=True))
    for table in Table.objects.filter(location__startswith="s3a://").only("pk", "location"):
        location = "s3://" + table.location[len("s3a://") :]
        if location not in taken:
            Table.objects.filter(pk=table.pk).update(location=location)
            taken.add(location)


class Migration(migrations.Migration):
    dependencies = [("tables", "0021_sso_identity")]
    operations = [migrations.RunPython(spell_s3, migrations.RunPython.noop)]
