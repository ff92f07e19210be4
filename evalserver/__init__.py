"""The Django project: settings, URLs and the Celery application."""
