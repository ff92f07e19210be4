"""File storage backends: static files (whitenoise), and the blob store's two backends
(``tasks.blobs``): the local filesystem under ``MEDIA_ROOT`` (the embedded default) and, chosen by
``EVALSERVER_STORAGE_URL=s3://...``, a private S3-compatible bucket (``evalserver.objectstorage``,
imported only then, so that the default never loads boto3).

Neither blob backend makes URLs: every stored file is served by the server's own views, after
their access checks, never by a link into the storage (a public or presigned bucket URL would
outlive the rules that guard it)."""

from pathlib import Path

from django.conf import settings
from django.core.files.storage import FileSystemStorage
from whitenoise.storage import CompressedManifestStaticFilesStorage


class StaticStorage(CompressedManifestStaticFilesStorage):
    manifest_strict = False

    def url(self, name: str | None, force: bool = False) -> str:
        try:
            return super().url(name, force)
        except ValueError:
            return FileSystemStorage.url(self, name)


class NoURLs:
    """Blob storages refuse to name a URL: downloads go through the views' access rules."""

    def url(self, name: str | None, *args: object, **kwargs: object) -> str:
        raise NotImplementedError("stored files are served only through the server's views, never by URL")


class BlobFileSystemStorage(NoURLs, FileSystemStorage):
    """The blob store on the local disk, under ``MEDIA_ROOT`` as it is when asked (tests and
    commands change it after start-up; Django's own class would keep the first value)."""

    @property
    def base_location(self) -> str:  # type: ignore[override]
        return str(settings.MEDIA_ROOT)

    @property
    def location(self) -> str:  # type: ignore[override]
        return str(Path(settings.MEDIA_ROOT).resolve())
