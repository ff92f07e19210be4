from typing import Any

from django.apps import AppConfig
from django.conf import settings


class ResponseKindConfig(AppConfig):
    name = "kinds.response"
    label = "response"
    verbose_name = "Response tasks (vBLEU pools and vectors)"

    def ready(self) -> None:
        # Here, not at the top: models can be imported only once the apps are loaded.
        from kinds.response.vectors import BlobEncodingStore
        from scoring.kinds.response.encodings import set_encoding_store
        from scoring.kinds.response.kind import set_resource_locator
        from tasks import blobs
        from tasks.changes import scoring_worker_starting
        from tasks.hooks import add_organiser_link

        # Vector tables and encoder models organisers upload (load_vectors, load_encoder) live in
        # the blob store's "vectors" and "encoders" folders, named by checksum, for every process
        # that scores (web, worker, commands) on any host: asked per file, so a worker without the
        # shared disk fetches it (checked against its sha256) into its cache.
        set_resource_locator(blobs.path)
        # A gold version's encoded references, kept by whichever worker encoded them first.
        set_encoding_store(BlobEncodingStore())
        add_organiser_link("response", "Extend the references from a dialogue pool (vBLEU, or vBERTScore on "
                                       "tasks that report BERTScore)", "organiser-vbleu")
        add_organiser_link("response", "Encoder model for BERTScore", "organiser-encoder")
        scoring_worker_starting.connect(_use_tagging_processes, dispatch_uid="response-tagging-processes")


def _use_tagging_processes(**_: Any) -> None:
    """The background worker tags a large response run over EVALSERVER_TAGGING_PROCESSES forked
    processes (both cores by default)."""
    from scoring.kinds.response.kind import set_tagging_processes

    set_tagging_processes(settings.EVALSERVER_TAGGING_PROCESSES)
