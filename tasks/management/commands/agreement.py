"""``manage.py agreement``: agreement of a judgements file (``scoring.judgements.agreement_cli``) as a
Django command (``tasks.management.offline``)."""

from scoring.judgements import agreement_cli
from tasks.management.offline import offline_command

Command = offline_command(agreement_cli)
