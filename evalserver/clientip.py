"""The client's own address, for rate limits and the access log.

Behind a TLS proxy every request comes from the proxy's address, and ``X-Forwarded-For`` says
who the proxy's client was; but anyone can send that header, so it is believed only as far as
trusted proxies (``EVALSERVER_TRUSTED_PROXIES``) wrote it. The chain is walked from the right
(the hop the nearest proxy added) and the first address that is not a trusted proxy is the
client. Without trusted proxies the TCP peer (``REMOTE_ADDR``) is the client and the header is
ignored.
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv6Address, ip_address

from django.conf import settings
from django.http import HttpRequest


def _parse(text: str) -> IPv4Address | IPv6Address | None:
    text = text.strip()
    if text.startswith("[") and "]" in text:  # "[2001:db8::1]:443"
        text = text[1:text.index("]")]
    elif text.count(":") == 1:  # "203.0.113.7:5123"
        text = text.split(":", 1)[0]
    try:
        return ip_address(text)
    except ValueError:
        return None


def _trusted(address: IPv4Address | IPv6Address) -> bool:
    return any(address in network for network in settings.EVALSERVER_TRUSTED_PROXIES)


def client_ip(request: HttpRequest) -> str | None:
    """The client's address as text (``None`` if the server was given none, e.g. a Unix socket)."""
    peer = _parse(request.META.get("REMOTE_ADDR") or "")
    if peer is None:
        return None
    client = peer
    if not _trusted(peer):
        return str(peer)
    # Several X-Forwarded-For headers arrive joined with commas: one chain.
    hops = [hop for hop in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if hop.strip()]
    for hop in reversed(hops):
        address = _parse(hop)
        if address is None:
            break  # a trusted proxy would not write this: believe nothing further left
        client = address
        if not _trusted(address):
            break
    return str(client)
