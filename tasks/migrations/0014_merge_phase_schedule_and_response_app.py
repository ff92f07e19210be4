# The phase schedule (integrity) and the response app's move with the quota rule (reshape) were made on branches from 0011.

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('tasks', '0012_phase_schedule_and_gold_changes'),
        ('tasks', '0013_remove_run_failure_is_server_side'),
    ]

    operations = [
    ]
