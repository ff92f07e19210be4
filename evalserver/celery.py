"""The Celery application; configuration comes from Django settings (``CELERY_*``)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalserver.settings")

app = Celery("evalserver")
app.config_from_object("django.conf:settings", namespace="CELERY")
# Task modules are named jobs.py (a module named tasks.tasks would be confusing), so look for those.
app.autodiscover_tasks(related_name="jobs")
