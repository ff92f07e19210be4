"""``manage.py requeue_stuck``: send again the scoring jobs of runs whose job was lost."""

from typing import Any

from django.core.management.base import BaseCommand

from tasks.jobs import requeue_stuck_runs


class Command(BaseCommand):
    help = "Re-send runs queued for more than two minutes or scoring past the hard time limit."

    def handle(self, *args: Any, **options: Any) -> None:
        ids = requeue_stuck_runs()
        self.stdout.write(f"re-sent {len(ids)} run(s)" + (f": {', '.join(map(str, ids))}" if ids else ""))
