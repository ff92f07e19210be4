"""ReferencePool and PoolJob, moved here from the tasks app (its migration 0012 removes them from
its state): state only, on the tables they had (``Meta.db_table``), so no row moves."""

import django.core.validators
import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('tasks', '0012_pools_moved_to_the_response_app'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='ReferencePool',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('sha256', models.CharField(max_length=64, unique=True)),
                        ('name', models.CharField(blank=True, help_text="the uploaded file's name, for display", max_length=255, validators=[django.core.validators.ProhibitNullCharactersValidator()])),
                        ('n_pairs', models.PositiveIntegerField()),
                        ('size', models.PositiveBigIntegerField(help_text='bytes')),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, to=settings.AUTH_USER_MODEL)),
                    ],
                    options={
                        'db_table': 'tasks_referencepool',
                        'ordering': ['-created_at'],
                    },
                ),
                migrations.CreateModel(
                    name='PoolJob',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('upload_sha256', models.CharField(blank=True, help_text='the uploaded pool waiting to be read', max_length=64)),
                        ('upload_name', models.CharField(blank=True, max_length=255, validators=[django.core.validators.ProhibitNullCharactersValidator()])),
                        ('ratings_sha256', models.CharField(blank=True, help_text='uploaded human ratings, if any', max_length=64)),
                        ('options', models.JSONField(blank=True, default=dict, help_text='from_version, label, phase ids, retrieval and rater settings')),
                        ('status', models.CharField(choices=[('queued', 'queued'), ('running', 'running'), ('done', 'done'), ('failed', 'failed')], db_index=True, default='queued', max_length=8)),
                        ('stage', models.CharField(blank=True, max_length=16)),
                        ('done', models.PositiveBigIntegerField(default=0)),
                        ('total', models.PositiveBigIntegerField(default=0)),
                        ('stages_done', models.JSONField(blank=True, default=list, help_text='[stage, seconds] of each finished stage')),
                        ('errors', models.JSONField(blank=True, default=list)),
                        ('result', models.JSONField(blank=True, default=dict, help_text='what was made: pool, version, figures')),
                        ('claim_token', models.CharField(blank=True, max_length=32)),
                        ('attempts', models.PositiveSmallIntegerField(default=0)),
                        ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                        ('sent_at', models.DateTimeField(blank=True, help_text='when the job was last handed to a worker', null=True)),
                        ('started_at', models.DateTimeField(blank=True, null=True)),
                        ('heartbeat_at', models.DateTimeField(blank=True, null=True)),
                        ('finished_at', models.DateTimeField(blank=True, null=True)),
                        ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, to=settings.AUTH_USER_MODEL)),
                        ('task', models.ForeignKey(blank=True, help_text='the response task whose gold is extended; empty: store the pool only', null=True, on_delete=django.db.models.deletion.CASCADE, related_name='pool_jobs', to='tasks.task')),
                        ('version', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='tasks.goldversion')),
                        ('pool', models.ForeignKey(blank=True, help_text='the stored pool used, or (once done) the pool the upload was stored as', null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='response.referencepool')),
                    ],
                    options={
                        'db_table': 'tasks_pooljob',
                        'ordering': ['-created_at', '-id'],
                    },
                ),
            ],
            database_operations=[],
        ),
    ]
