"""Static file storage: hashed, compressed names from whitenoise, without failing every page
when ``collectstatic`` has not run yet (the page then links the plain name)."""

from django.core.files.storage import FileSystemStorage
from whitenoise.storage import CompressedManifestStaticFilesStorage


class StaticStorage(CompressedManifestStaticFilesStorage):
    manifest_strict = False

    def url(self, name: str | None, force: bool = False) -> str:
        try:
            return super().url(name, force)
        except ValueError:
            return FileSystemStorage.url(self, name)
