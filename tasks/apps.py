from pathlib import Path

from django.apps import AppConfig
from django.conf import settings


class TasksConfig(AppConfig):
    name = "tasks"
    verbose_name = "Shared tasks"

    def ready(self) -> None:
        # Here, not at the top: models can be imported only once the apps are loaded.
        from scoring.kinds.response.kind import set_vector_directory
        from tasks import signals  # noqa: F401 - connects the receivers

        # Vector tables organisers upload (load_vectors) live beside the run files, in every
        # process that scores (web, worker, commands).
        set_vector_directory(Path(settings.MEDIA_ROOT) / "vectors")
