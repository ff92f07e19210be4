"""Static file storage: hashed, compressed names from whitenoise, without failing pages when a
file is missing from the manifest (e.g. before the first ``collectstatic``)."""

from whitenoise.storage import CompressedManifestStaticFilesStorage


class StaticStorage(CompressedManifestStaticFilesStorage):
    # A missing manifest entry falls back to the plain name instead of a 500 for every page.
    manifest_strict = False
