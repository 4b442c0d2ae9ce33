"""Every restore request has its txn_id now (0007): unique, with a random default."""

import uuid

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("tables", "0007_restore_txn_id_withdrawn"),
    ]

    operations = [
        migrations.AlterField(
            model_name="restorerequest",
            name="txn_id",
            field=models.UUIDField(default=uuid.uuid4, editable=False, unique=True),
        ),
    ]
