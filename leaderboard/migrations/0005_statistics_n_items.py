from django.db import migrations


class Migration(migrations.Migration):
    """Statistics count items, whatever the task's kind calls them (dialogues, contexts)."""

    dependencies = [
        ("leaderboard", "0004_statistics_significance_level"),
    ]

    operations = [
        migrations.RenameField(model_name="taskstatistics", old_name="n_dialogues", new_name="n_items"),
    ]
