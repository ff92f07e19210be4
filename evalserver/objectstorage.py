"""The blob store's object-storage backend: a private bucket of an S3-compatible service (AWS S3,
MinIO, Ceph, ...) through django-storages, chosen by ``EVALSERVER_STORAGE_URL`` (settings).

Private by construction: objects are written without an ACL (the bucket's own, private by
default), and no URL of any kind is made (``NoURLs``): the server's views read the bytes and serve
them after their access checks. Credentials come from boto3's usual places (``AWS_ACCESS_KEY_ID``
and ``AWS_SECRET_ACCESS_KEY`` in the environment, a profile, an instance role)."""

from storages.backends.s3 import S3Storage

from evalserver.storage import NoURLs


class PrivateS3Storage(NoURLs, S3Storage):
    default_acl = None
    querystring_auth = False
    file_overwrite = True  # content-addressed: the same key always holds the same bytes
