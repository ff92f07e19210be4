"""The Django project: settings, URLs and the Celery application.

The Celery app is made here, as Celery's Django guide has it, so that the jobs of every app
(``@shared_task`` in ``tasks/jobs.py``, ``leaderboard/jobs.py``, ``kinds/response/extension_jobs.py``) bind
to it without importing it: the apps never import the project."""

from evalserver.celery import app as celery_app

__all__ = ["celery_app"]
