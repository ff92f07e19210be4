"""``manage.py judgements_to_gold``: a judgements file made a gold file (``scoring.judgements.gold_cli``)
as a Django command (``tasks.management.offline``)."""

from scoring.judgements import gold_cli
from tasks.management.offline import offline_command

Command = offline_command(gold_cli)
