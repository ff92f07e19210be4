"""ReferencePool and PoolJob moved to the response kind's app (``kinds.response``, label
``response``): removed from this app's state only. Their tables keep their names
(``tasks_referencepool``, ``tasks_pooljob``; the models say so in ``Meta.db_table``), so no row
moves and nothing is written to the database."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("tasks", "0011_pool_jobs"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveField(model_name="referencepool", name="created_by"),
                migrations.DeleteModel(name="PoolJob"),
                migrations.DeleteModel(name="ReferencePool"),
            ],
            database_operations=[],
        ),
    ]
