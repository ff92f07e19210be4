# Corpus-level measures keep their per-item sufficient statistics beside their scores, so that
# their significance tests and intervals recompute the corpus figure (issue 26). Scores stored
# before have none: the statistics computation scores those runs again to get them.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('tasks', '0015_merge_run_heartbeat'),
    ]

    operations = [
        migrations.AddField(
            model_name='scorevector',
            name='statistics',
            field=models.BinaryField(blank=True, default=b''),
        ),
        migrations.AddField(
            model_name='scorevector',
            name='n_statistics',
            field=models.PositiveSmallIntegerField(default=0),
        ),
    ]
