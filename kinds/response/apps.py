from pathlib import Path

from django.apps import AppConfig
from django.conf import settings


class ResponseKindConfig(AppConfig):
    name = "kinds.response"
    label = "response"
    verbose_name = "Response tasks (vBLEU pools and vectors)"

    def ready(self) -> None:
        # Here, not at the top: models can be imported only once the apps are loaded.
        from scoring.kinds.response.kind import set_vector_directory
        from tasks.hooks import add_organiser_link

        # Vector tables organisers upload (load_vectors) live beside the run files, in every
        # process that scores (web, worker, commands).
        set_vector_directory(Path(settings.MEDIA_ROOT) / "vectors")
        add_organiser_link("response", "Extend the references from a dialogue pool (vBLEU)", "organiser-vbleu")
