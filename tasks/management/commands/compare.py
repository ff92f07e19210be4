"""``manage.py compare``: the offline comparison of ``scoring.compare`` as a Django command
(``tasks.management.offline``)."""

from scoring import compare
from tasks.management.offline import offline_command

Command = offline_command(compare)
