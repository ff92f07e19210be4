"""vBLEU (issue 15): dialogue pools stored once by checksum, and how a gold version was made."""

import django.core.validators
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("tasks", "0007_task_kinds"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="goldversion",
            name="provenance",
            field=models.JSONField(
                blank=True, default=dict,
                help_text="how the version was made when not uploaded as it is (vBLEU: the version extended, the "
                          "pool's checksum, retrieval and rater settings, held-out accuracy, seed)"),
        ),
        migrations.CreateModel(
            name="ReferencePool",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("sha256", models.CharField(max_length=64, unique=True)),
                ("name", models.CharField(blank=True, help_text="the uploaded file's name, for display",
                                          max_length=255,
                                          validators=[django.core.validators.ProhibitNullCharactersValidator()])),
                ("n_pairs", models.PositiveIntegerField()),
                ("size", models.PositiveBigIntegerField(help_text="bytes")),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("created_by", models.ForeignKey(blank=True, null=True,
                                                 on_delete=django.db.models.deletion.SET_NULL,
                                                 to=settings.AUTH_USER_MODEL)),
            ],
            options={"ordering": ["-created_at"]},
        ),
    ]
