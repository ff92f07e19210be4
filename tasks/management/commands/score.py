"""``manage.py score``: the offline scorer of ``scoring.cli`` as a Django command
(``tasks.management.offline``)."""

from scoring import cli
from tasks.management.offline import offline_command

Command = offline_command(cli)
