"""API tokens: stored only as a hash (django-rest-knox), shown once when created, one per user.

knox keeps the SHA-512 digest of each token and its first 15 characters as a lookup key;
a request's token is found by that key and compared with ``hmac.compare_digest``. A fast hash
is right here (not a slow password hasher): tokens are 256 random bits, so there is nothing to
guess, and every API request checks one. Tokens of the earlier clear-text table
(``rest_framework.authtoken``) were moved into knox's table by a data migration and keep working.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.plumbing import build_bearer_security_scheme_object
from knox.auth import TokenAuthentication as KnoxTokenAuthentication
from knox.models import AuthToken
from rest_framework import exceptions


class TokenAuthentication(KnoxTokenAuthentication):
    """``Authorization: Token <token>``; a header that is not UTF-8, or has a NUL character (which
    PostgreSQL refuses in the key lookup), is an invalid token (401), not a 500."""

    def authenticate_credentials(self, token: bytes) -> Any:
        try:
            token.decode("utf-8")
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("Invalid token.") from None
        if b"\x00" in token:
            raise exceptions.AuthenticationFailed("Invalid token: it contains a NUL character.")
        return super().authenticate_credentials(token)


class TokenScheme(OpenApiAuthenticationExtension):
    """The API schema's description of ``TokenAuthentication`` (drf-spectacular)."""

    target_class = "tasks.tokens.TokenAuthentication"
    name = "tokenAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return build_bearer_security_scheme_object(header_name="Authorization", token_prefix="Token")  # noqa: S106 (a scheme name)


def issue_token(user: Any) -> str:
    """A new token for ``user``, replacing any earlier one; the only time its text exists."""
    with transaction.atomic():  # a double click must not leave two tokens: serialise on the user row
        get_user_model().objects.select_for_update().filter(pk=user.pk).first()
        AuthToken.objects.filter(user=user).delete()
        _, token = AuthToken.objects.create(user=user, expiry=None)
    return token


def current_token(user: Any) -> AuthToken | None:
    """The user's token record (its creation time and first characters, never the token)."""
    return AuthToken.objects.filter(user=user).order_by("-created").first()


def revoke_tokens(user: Any) -> int:
    return AuthToken.objects.filter(user=user).delete()[0]


# The demo (``manage.py demo``) writes its logins, alice's token among them, to this file in
# VAR_DIR for the README's examples (``TOKEN=$(sed -n "s/^alice's API token: //p" ...)``).
LOGINS_FILE = "demo-logins.txt"
# What the file says in place of a token that no longer works (a sentence, not a secret).
NO_TOKEN = "(none: the token this file held was replaced or revoked; sign in as {username} and create one on My team)"  # noqa: S105, E501


def token_line(username: str) -> str:
    """The start of the logins file's line that holds ``username``'s token."""
    return f"{username}'s API token: "


def follow_in_logins_file(user: Any, token: str | None) -> bool:
    """Keep the demo's logins file true after ``user`` replaced (``token``) or revoked (None) their
    token on *My team*: the README's first curl reads the token from it, and with the dead token
    kept there it failed with 401. Only a file that already names the user is rewritten (written
    whole to a new file, then renamed over the old, owner-only as the demo made it); returns
    whether it was."""
    from pathlib import Path

    from django.conf import settings

    path = Path(settings.VAR_DIR) / LOGINS_FILE
    prefix = token_line(user.username)
    try:
        lines = path.read_text().splitlines(keepends=True)
    except (FileNotFoundError, UnicodeDecodeError):
        return False
    found = [index for index, line in enumerate(lines) if line.startswith(prefix)]
    if not found:
        return False
    for index in found:
        lines[index] = prefix + (token if token else NO_TOKEN.format(username=user.username)) + "\n"
    fresh = path.with_name(path.name + ".new")
    fresh.write_text("".join(lines))
    fresh.chmod(0o600)
    fresh.replace(path)
    return True
