"""Move the clear-text API tokens of ``rest_framework.authtoken`` into knox as SHA-512 digests.

Existing tokens keep working: knox finds a token by its first 15 characters and compares the
SHA-512 digest of the UTF-8 text (``knox.crypto.hash_token`` with the default algorithm), which
is what is stored here. The clear-text rows are deleted, so no token remains readable.
"""

import hashlib

from django.db import migrations

KNOX_TOKEN_KEY_LENGTH = 15  # knox.settings.CONSTANTS.TOKEN_KEY_LENGTH


def hash_tokens(apps, schema_editor):
    Token = apps.get_model("authtoken", "Token")
    AuthToken = apps.get_model("knox", "AuthToken")
    for token in Token.objects.all().iterator():
        AuthToken.objects.create(
            digest=hashlib.sha512(token.key.encode("utf-8")).hexdigest(),
            token_key=token.key[:KNOX_TOKEN_KEY_LENGTH], user_id=token.user_id, expiry=None)
        # auto_now_add set the creation time to now: keep the token's own (the team page shows it).
        AuthToken.objects.filter(digest=hashlib.sha512(token.key.encode("utf-8")).hexdigest()).update(
            created=token.created)
    Token.objects.all().delete()


def cannot_unhash(apps, schema_editor):
    # A digest cannot be turned back into its token: going back leaves users without tokens,
    # which they regenerate on their team page.
    apps.get_model("knox", "AuthToken").objects.all().delete()


class Migration(migrations.Migration):

    dependencies = [
        ("tasks", "0004_visible_names"),
        ("authtoken", "0004_alter_tokenproxy_options"),
        ("knox", "0009_extend_authtoken_field"),
    ]

    operations = [migrations.RunPython(hash_tokens, cannot_unhash)]
