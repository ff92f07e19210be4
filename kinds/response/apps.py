from typing import Any

from django.apps import AppConfig
from django.conf import settings


class ResponseKindConfig(AppConfig):
    name = "kinds.response"
    label = "response"
    verbose_name = "Response tasks (vBLEU pools and vectors)"

    def ready(self) -> None:
        # Here, not at the top: models can be imported only once the apps are loaded.
        from scoring.kinds.response.kind import set_vector_locator
        from tasks import blobs
        from tasks.changes import scoring_worker_starting
        from tasks.hooks import add_organiser_link

        # Vector tables organisers upload (load_vectors) live in the blob store's "vectors" folder,
        # named by checksum, for every process that scores (web, worker, commands) on any host:
        # asked per table, so a worker without the shared disk fetches it (checked) into its cache.
        set_vector_locator(lambda sha256: blobs.path("vectors", sha256))
        add_organiser_link("response", "Extend the references from a dialogue pool (vBLEU)", "organiser-vbleu")
        scoring_worker_starting.connect(_use_tagging_processes, dispatch_uid="response-tagging-processes")


def _use_tagging_processes(**_: Any) -> None:
    """The background worker tags a large response run over EVALSERVER_TAGGING_PROCESSES forked
    processes (both cores by default)."""
    from scoring.kinds.response.kind import set_tagging_processes

    set_tagging_processes(settings.EVALSERVER_TAGGING_PROCESSES)
