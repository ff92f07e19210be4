# The run heartbeat of the background scoring worker (speed) was made on a branch from 0011.

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('tasks', '0012_run_heartbeat'),
        ('tasks', '0014_merge_phase_schedule_and_response_app'),
    ]

    operations = [
    ]
