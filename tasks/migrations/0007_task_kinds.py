"""Tasks get a kind; DQ/ND-specific columns become generic ones, keeping every row and score.

- ``Task.kind``: every existing task is DQ/ND (``stc3``).
- ``GoldVersion.n_dialogues`` -> ``n_items``; ``has_quality``/``has_nugget`` -> ``measure_keys``
  (the measures runs are scored with against the version, from the task's configuration).
- ``Run.has_quality``/``has_nugget`` -> ``parts`` (the measure groups it was scored in).
- ``Phase.per_dialogue_feedback`` -> ``per_item_feedback``.
- ``Score.summary`` from ``{"quality": {dim: {m: x}}, "nugget": {m: x}, "n_dialogues", "variant",
  "alpha", "averaging"[, "n_missing"]}`` to ``Scored.summary()``: ``{"measures": {key: x},
  "n_items", "settings": {"variant", "alpha", "averaging"}[, "n_missing"]}``. The floats are moved,
  never recomputed, so every stored number stays bit for bit. Both directions are implemented.
"""

from django.db import migrations, models

import tasks.models

# The measures of a DQ/ND configuration that predates per-task measure lists (scoring.kinds.stc3.config).
DEFAULT_QUALITY = ["rsnod", "nmd"]
DEFAULT_NUGGET = ["jsd", "rnss"]


def _keys(config, quality, nugget):
    keys = []
    if quality:
        for dim in config.get("quality_dimensions", []):
            keys += [f"quality.{dim}.{name}" for name in config.get("quality_measures", DEFAULT_QUALITY)]
    if nugget:
        keys += [f"nugget.{name}" for name in config.get("nugget_measures", DEFAULT_NUGGET)]
    return keys


def new_summary(old):
    if "measures" in old:
        return old
    measures = {}
    for dim, values in (old.get("quality") or {}).items():
        measures.update({f"quality.{dim}.{name}": value for name, value in values.items()})
    measures.update({f"nugget.{name}": value for name, value in (old.get("nugget") or {}).items()})
    data = {"measures": measures, "n_items": old.get("n_dialogues", 0),
            "settings": {name: old[name] for name in ("variant", "alpha", "averaging") if name in old}}
    if old.get("n_missing"):
        data["n_missing"] = old["n_missing"]
    return data


def old_summary(new):
    if "measures" not in new:
        return new
    data = {}
    for key, value in new["measures"].items():
        parts = key.split(".")
        if parts[0] == "quality" and len(parts) == 3:
            data.setdefault("quality", {}).setdefault(parts[1], {})[parts[2]] = value
        elif parts[0] == "nugget" and len(parts) == 2:
            data.setdefault("nugget", {})[parts[1]] = value
    data.update(n_dialogues=new.get("n_items", 0), **new.get("settings", {}))
    if new.get("n_missing"):
        data["n_missing"] = new["n_missing"]
    return data


def forwards(apps, schema_editor):
    GoldVersion, Run, Score = (apps.get_model("tasks", name) for name in ("GoldVersion", "Run", "Score"))
    for version in GoldVersion.objects.select_related("task").iterator():
        version.measure_keys = _keys(version.task.config, version.has_quality, version.has_nugget)
        version.save(update_fields=["measure_keys"])
    for quality in (False, True):
        for nugget in (False, True):
            parts = sorted(name for name, present in (("quality", quality), ("nugget", nugget)) if present)
            Run.objects.filter(has_quality=quality, has_nugget=nugget).update(parts=parts)
    for score in Score.objects.only("pk", "summary").iterator():
        score.summary = new_summary(score.summary)
        score.save(update_fields=["summary"])


def backwards(apps, schema_editor):
    GoldVersion, Run, Score = (apps.get_model("tasks", name) for name in ("GoldVersion", "Run", "Score"))
    for version in GoldVersion.objects.iterator():
        version.has_quality = any(key.startswith("quality.") for key in version.measure_keys)
        version.has_nugget = any(key.startswith("nugget.") for key in version.measure_keys)
        version.save(update_fields=["has_quality", "has_nugget"])
    for run in Run.objects.only("pk", "parts").iterator():
        run.has_quality, run.has_nugget = "quality" in run.parts, "nugget" in run.parts
        run.save(update_fields=["has_quality", "has_nugget"])
    for score in Score.objects.only("pk", "summary").iterator():
        score.summary = old_summary(score.summary)
        score.save(update_fields=["summary"])


class Migration(migrations.Migration):

    dependencies = [
        ("tasks", "0006_run_interruptions"),
    ]

    operations = [
        migrations.AddField(
            model_name="task", name="kind",
            field=models.CharField(default="stc3", help_text="the kind of task (scoring.kinds): what files look "
                                   "like and how they are scored", max_length=30,
                                   validators=[tasks.models.validate_kind]),
        ),
        migrations.AlterField(
            model_name="task", name="config",
            field=models.JSONField(help_text="the kind's configuration as a dict (labels, measures, options)"),
        ),
        migrations.RenameField(model_name="goldversion", old_name="n_dialogues", new_name="n_items"),
        migrations.AddField(
            model_name="goldversion", name="measure_keys",
            field=models.JSONField(blank=True, default=list,
                                   help_text="the keys of the measures runs are scored with against this version"),
        ),
        migrations.AddField(
            model_name="run", name="parts",
            field=models.JSONField(blank=True, default=list,
                                   help_text="the measure groups the run was scored in (a DQ-only run: ['quality'])"),
        ),
        migrations.AddField(
            model_name="score", name="details",
            field=models.JSONField(blank=True, default=dict, help_text="per-item details the kind reports"),
        ),
        migrations.RunPython(forwards, backwards),
        migrations.RemoveField(model_name="goldversion", name="has_quality"),
        migrations.RemoveField(model_name="goldversion", name="has_nugget"),
        migrations.RemoveField(model_name="run", name="has_quality"),
        migrations.RemoveField(model_name="run", name="has_nugget"),
        migrations.RenameField(model_name="phase", old_name="per_dialogue_feedback", new_name="per_item_feedback"),
        migrations.AlterField(
            model_name='goldversion',
            name='compiled',
            field=models.BinaryField(help_text="the kind's compiled gold (to_bytes()), ready for scoring"),
        ),
        migrations.AlterField(
            model_name='phase',
            name='live_subset_size',
            field=models.PositiveIntegerField(blank=True, help_text='test phase: the live leaderboard scores this many items only', null=True),
        ),
        migrations.AlterField(
            model_name='phase',
            name='per_item_feedback',
            field=models.BooleanField(default=True, help_text='run owners see per-item scores'),
        ),
        migrations.AlterField(
            model_name='phase',
            name='results_published',
            field=models.BooleanField(default=False, help_text='final phase: full-test-set scores and per-item scores are public'),
        ),
        migrations.AlterField(
            model_name='scorevector',
            name='key',
            field=models.CharField(help_text="a measure key of the task's kind (scoring.kinds.measure_key)", max_length=64),
        ),
    
    ]
