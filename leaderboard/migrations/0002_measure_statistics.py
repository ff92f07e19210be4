# Statistics per measure in rows of their own; existing statistics are moved, not recomputed.

import django.db.models.deletion
import numpy as np
from django.db import migrations, models

SUMMARY = ("run_ids", "means", "ci_low", "ci_high", "top_group", "residual_variance")


def split_statistics(apps, schema_editor):
    """Move each measure's JSON entry to a row: its summary, and the p-values as the exceedance
    counts they were made of (p = (count + 1) / (B + 1); the JSON kept 10 decimals, plenty to
    recover counts up to B = 1,000,000). Differences, effect sizes and standard errors are
    rebuilt from the means, V_E and the p-values when read."""
    TaskStatistics = apps.get_model("leaderboard", "TaskStatistics")
    MeasureStatistics = apps.get_model("leaderboard", "MeasureStatistics")
    for record in TaskStatistics.objects.all():
        rows = []
        for key, entry in (record.data or {}).items():
            pvalues = np.array(entry["pvalues"], dtype=np.float64)
            upper = pvalues[np.triu_indices(pvalues.shape[0], 1)]
            counts = np.rint(upper * (record.permutations + 1)).astype(np.int64) - 1
            defined = all(value is not None for row in entry["effect_sizes"] for value in row)
            summary = {name: entry[name] for name in SUMMARY if name in entry}
            rows.append(MeasureStatistics(statistics=record, key=key,
                                          summary={**summary, "effect_sizes_defined": defined},
                                          pairwise=counts.astype("<u4").tobytes()))
        MeasureStatistics.objects.bulk_create(rows)


class Migration(migrations.Migration):

    dependencies = [
        ('leaderboard', '0001_initial'),
    ]

    operations = [
        migrations.CreateModel(
            name='MeasureStatistics',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('key', models.CharField(max_length=64)),
                ('summary', models.JSONField(default=dict)),
                ('pairwise', models.BinaryField()),
                ('statistics', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='measures', to='leaderboard.taskstatistics')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('statistics', 'key'), name='one_row_per_measure')],
            },
        ),
        migrations.RunPython(split_statistics, migrations.RunPython.noop),
        migrations.RemoveField(
            model_name='taskstatistics',
            name='data',
        ),
    ]
