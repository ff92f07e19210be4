"""Participants' data: each gold version keeps its uploaded file (content-addressed, so the
participants' data can be derived from it), a phase can keep its data for registered teams, and
organisers add files to a task's or a phase's data section."""

import django.core.validators
import django.db.models.deletion
import django.utils.timezone
import tasks.models
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('tasks', '0008_reference_pools'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='goldversion',
            name='source_sha256',
            field=models.CharField(blank=True, help_text="the gold file as uploaded, kept under this SHA-256 (participants' data is made from it); empty for versions loaded before gold files were kept: they have no participants' data", max_length=64),
        ),
        migrations.AddField(
            model_name='phase',
            name='data_registered_only',
            field=models.BooleanField(default=False, help_text="the phase's data (participants' data, sample run, the organisers' files of the phase) only for signed-in members of a team, approved where the task requires approval, who accepted the task's terms where it has terms; organisers always"),
        ),
        migrations.CreateModel(
            name='DataFile',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(help_text="the download's file name, unique in the task", max_length=100, validators=[tasks.models.validate_data_file_name])),
                ('description', models.TextField(blank=True, max_length=2000, validators=[django.core.validators.ProhibitNullCharactersValidator()])),
                ('sha256', models.CharField(max_length=64)),
                ('size', models.PositiveBigIntegerField()),
                ('uploaded_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('phase', models.ForeignKey(blank=True, help_text="the phase whose data section lists the file, with that phase's access rule (from its start; registered teams only if the phase says so); empty: the whole task, listed in every data section and available to everyone who can see the task", null=True, on_delete=django.db.models.deletion.CASCADE, related_name='data_files', to='tasks.phase')),
                ('task', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='data_files', to='tasks.task')),
                ('uploaded_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['task', 'name'],
                'constraints': [models.UniqueConstraint(fields=('task', 'name'), name='unique_data_file_name')],
            },
        ),
    ]
