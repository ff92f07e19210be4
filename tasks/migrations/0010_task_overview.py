"""The task overview: rules, contact and citation on the task; affiliations; the record of who
accepted which text of a task's terms, and when."""

import django.core.validators
import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('tasks', '0009_participant_data'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='task',
            name='citation',
            field=models.TextField(blank=True, help_text='how to cite the task (a reference or BibTeX), shown on its overview page', validators=[django.core.validators.ProhibitNullCharactersValidator()]),
        ),
        migrations.AddField(
            model_name='task',
            name='contact',
            field=models.CharField(blank=True, help_text='how to reach the organisers: an email address, a URL or a sentence', max_length=300, validators=[django.core.validators.ProhibitNullCharactersValidator()]),
        ),
        migrations.AddField(
            model_name='task',
            name='rules',
            field=models.TextField(blank=True, help_text="the task's rules, shown on its overview page", validators=[django.core.validators.ProhibitNullCharactersValidator()]),
        ),
        migrations.AddField(
            model_name='task',
            name='terms',
            field=models.TextField(blank=True, help_text='terms participants accept before they submit runs or download data kept for registered teams; every acceptance is recorded with the text accepted. A changed text is a new version that everyone accepts again. Empty: nothing to accept', validators=[django.core.validators.ProhibitNullCharactersValidator()]),
        ),
        migrations.CreateModel(
            name='Profile',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('affiliation', models.CharField(help_text='university, company or lab', max_length=200, validators=[django.core.validators.ProhibitNullCharactersValidator()])),
                ('user', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='profile', to=settings.AUTH_USER_MODEL)),
            ],
        ),
        migrations.CreateModel(
            name='TermsAcceptance',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('username', models.CharField(help_text='kept if the account is deleted', max_length=150)),
                ('affiliation', models.CharField(blank=True, help_text='as given then', max_length=200)),
                ('terms_sha256', models.CharField(help_text='the version: SHA-256 of the text accepted', max_length=64)),
                ('terms', models.TextField(help_text='the text accepted, word for word')),
                ('accepted_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('ip_address', models.GenericIPAddressField(blank=True, null=True)),
                ('task', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='terms_acceptances', to='tasks.task')),
                ('user', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='terms_acceptances', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['-accepted_at'],
                'constraints': [models.UniqueConstraint(fields=('task', 'user', 'terms_sha256'), name='unique_terms_acceptance')],
            },
        ),
    ]
