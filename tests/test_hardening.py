"""Hardening (issue 11, defect 8): rate limits and the access log keyed on the real client address
through trusted proxies only; settings that refuse values they cannot read, naming the variable."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from ipaddress import ip_network
from pathlib import Path

import pytest
from django.core.cache import cache
from django.test import Client, RequestFactory

from evalserver.clientip import client_ip
from tasks.models import AccessLog
from tests.conftest import World

ROOT = Path(__file__).resolve().parent.parent
PROXY = "10.0.0.2"


@pytest.fixture(autouse=True)
def _one_rate_window(one_rate_window: None) -> None:
    """Every limit this module counts exactly counts in one window (tests.conftest.one_rate_window):
    a burst straddling django-ratelimit's fixed window made the proxy test see eleven 200s."""


# The client address -----------------------------------------------------------------------------

@pytest.mark.parametrize("trusted, peer, forwarded, expected", [
    # No trusted proxies: the header is ignored, whatever it says.
    ((), "198.51.100.7", "203.0.113.1", "198.51.100.7"),
    ((), "198.51.100.7", "", "198.51.100.7"),
    # One trusted proxy: its client is the rightmost hop.
    (("10.0.0.2/32",), PROXY, "203.0.113.1", "203.0.113.1"),
    (("10.0.0.2/32",), PROXY, "66.66.66.66, 203.0.113.1", "203.0.113.1"),  # forged left part ignored
    # A chain of trusted proxies is skipped, from the right.
    (("10.0.0.0/8",), PROXY, "66.66.66.66, 203.0.113.1, 10.1.2.3", "203.0.113.1"),
    (("10.0.0.0/8", "2001:db8::/32"), "2001:db8::5", "203.0.113.1:5123, [2001:db8::9]:443", "203.0.113.1"),
    # A request that did not come through the proxy: its header is not believed.
    (("10.0.0.2/32",), "198.51.100.7", "203.0.113.1", "198.51.100.7"),
    # Garbage written into the chain: nothing left of it is believed; the last credible hop counts.
    (("10.0.0.0/8",), PROXY, "203.0.113.1, not-an-address", PROXY),
    # Only trusted hops: the leftmost is the client (an internal caller).
    (("10.0.0.0/8",), PROXY, "10.9.9.9", "10.9.9.9"),
])
def test_client_address(settings, trusted: tuple, peer: str, forwarded: str, expected: str) -> None:
    settings.EVALSERVER_TRUSTED_PROXIES = tuple(ip_network(network) for network in trusted)
    request = RequestFactory().get("/", REMOTE_ADDR=peer, HTTP_X_FORWARDED_FOR=forwarded)
    assert client_ip(request) == expected


def _failed_logins(count: int, peer: str, forwarded: str) -> list[int]:
    return [Client(REMOTE_ADDR=peer, HTTP_X_FORWARDED_FOR=forwarded).post(
        "/accounts/login/", {"username": "alice", "password": f"wrong-{number}"}).status_code
        for number in range(count)]


@pytest.mark.django_db
def test_without_trusted_proxies_a_forged_forwarded_for_does_not_escape_the_sign_in_limit(
        world: World, settings) -> None:
    cache.clear()
    settings.EVALSERVER_TRUSTED_PROXIES = ()
    statuses = [Client(REMOTE_ADDR="198.51.100.7", HTTP_X_FORWARDED_FOR=f"203.0.113.{number}").post(
        "/accounts/login/", {"username": "alice", "password": "wrong"}).status_code for number in range(11)]
    assert statuses == [200] * 10 + [429]  # EVALSERVER_LOGIN_RATE = 10/m, one address whatever the header


@pytest.mark.django_db
def test_behind_a_trusted_proxy_two_clients_are_limited_separately(world: World, settings) -> None:
    cache.clear()
    settings.EVALSERVER_TRUSTED_PROXIES = (ip_network(f"{PROXY}/32"),)
    assert _failed_logins(11, PROXY, "203.0.113.1") == [200] * 10 + [429]
    assert _failed_logins(1, PROXY, "203.0.113.2") == [200]  # another client behind the same proxy
    assert _failed_logins(1, PROXY, "66.66.66.66, 203.0.113.1") == [429]  # a forged hop does not help
    # Sign-up too (EVALSERVER_SIGNUP_RATE = 5/h): the sixth from one client is refused, not another's.
    statuses = [Client(REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR="203.0.113.3").post(
        "/accounts/signup/", {"username": f"u{number}"}).status_code for number in range(6)]
    assert statuses == [400] * 5 + [429]
    assert Client(REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR="203.0.113.4").post(
        "/accounts/signup/", {"username": "u9"}).status_code == 400


@pytest.mark.django_db
def test_the_access_log_records_the_client_address(world: World, settings) -> None:
    settings.EVALSERVER_TRUSTED_PROXIES = (ip_network(f"{PROXY}/32"),)
    organiser = Client(REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR="203.0.113.5")
    organiser.force_login(world.organiser)
    assert organiser.get(f"/organiser/{world.task.slug}/results.csv").status_code == 200
    settings.EVALSERVER_TRUSTED_PROXIES = ()
    assert organiser.get(f"/organiser/{world.task.slug}/results.json").status_code == 200
    assert list(AccessLog.objects.order_by("pk").values_list("ip_address", flat=True)) == ["203.0.113.5", PROXY]


# Settings that cannot be read ---------------------------------------------------------------------

def _import_settings(tmp_path: Path, **variables: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "EVALSERVER_VAR_DIR": str(tmp_path), **variables}
    for name in ("DJANGO_SECURE", "DJANGO_DEBUG", "EVALSERVER_TRUSTED_PROXIES"):
        if name not in variables:
            env.pop(name, None)
    return subprocess.run([sys.executable, "-c", "import evalserver.settings as s; "
                           "print(s.SECURE, s.DEBUG, s.RUN_UPLOAD_MAX_BYTES, s.EVALSERVER_TRUSTED_PROXIES)"],
                          cwd=ROOT, env=env, capture_output=True, text=True)


BOOLEANS = ["DJANGO_DEBUG", "DJANGO_SECURE", "DJANGO_SECURE_SSL_REDIRECT", "DJANGO_HSTS_INCLUDE_SUBDOMAINS",
            "DJANGO_HSTS_PRELOAD", "EVALSERVER_CACHE_TASK_LOOKUPS", "EVALSERVER_SIGNUP_OPEN",
            "EVALSERVER_TEAMS_NEED_APPROVAL"]
NUMBERS = ["DJANGO_HSTS_SECONDS", "EVALSERVER_RUN_MAX_BYTES", "EVALSERVER_SCORING_SOFT_TIME_LIMIT",
           "EVALSERVER_SCORING_TIME_LIMIT", "EVALSERVER_STALE_GRACE_SECONDS"]


@pytest.mark.parametrize("name", BOOLEANS)
def test_a_boolean_it_cannot_read_stops_the_start(tmp_path: Path, name: str) -> None:
    # DJANGO_SECURE on: the SSL/HSTS variables are read only then.
    result = _import_settings(tmp_path, **{"DJANGO_SECURE": "true", name: "ture"})
    assert result.returncode != 0
    assert (f"ImproperlyConfigured: {name}='ture' is not a boolean; use one of 1, true, yes, on or 0, false, no, off"
            in result.stderr)


@pytest.mark.parametrize("name, value, message", [
    *((name, "12x", "is not a whole number") for name in NUMBERS),
    ("EVALSERVER_RUN_MAX_BYTES", "100", "is out of range: use a whole number at least 1024"),
    ("DJANGO_HSTS_SECONDS", "-1", "is out of range: use a whole number at least 0"),
    ("EVALSERVER_STATISTICS_MODE", "threads", "is not one of celery, worker, thread, sync, off"),
    ("EVALSERVER_LOG_LEVEL", "LOUD", "is not one of DEBUG, INFO, WARNING, ERROR, CRITICAL"),
    ("EVALSERVER_LOGIN_RATE", "10 per minute", "is not a rate"),
    ("EVALSERVER_UPLOAD_RATE", "0/m", "is not a rate"),
    ("EVALSERVER_NOTICE_MODE", "thread", "is not one of celery, worker, off"),
    ("EVALSERVER_SITE_URL", "eval.example.org", "is not an http(s) address such as https://eval.example.org"),
])
def test_a_number_or_choice_it_cannot_read_stops_the_start(tmp_path: Path, name: str, value: str,
                                                            message: str) -> None:
    result = _import_settings(tmp_path, **{"DJANGO_SECURE": "true", name: value})
    assert result.returncode != 0
    assert f"ImproperlyConfigured: {name}={value!r} {message}" in result.stderr


def test_trusted_proxies_must_be_addresses(tmp_path: Path) -> None:
    result = _import_settings(tmp_path, EVALSERVER_TRUSTED_PROXIES="10.0.0.1, proxy.local")
    assert "ImproperlyConfigured: EVALSERVER_TRUSTED_PROXIES: 'proxy.local' is not an IP address" in result.stderr


def test_a_storage_url_it_cannot_read_stops_the_start(tmp_path: Path) -> None:
    result = _import_settings(tmp_path, EVALSERVER_STORAGE_URL="s3://bucket?acl=public-read")
    assert result.returncode != 0
    assert ("ImproperlyConfigured: EVALSERVER_STORAGE_URL: unknown option 'acl' (known: endpoint_url, region_name, "
            "addressing_style)") in result.stderr


def test_values_it_can_read(tmp_path: Path) -> None:
    result = _import_settings(tmp_path, DJANGO_SECURE="Off", DJANGO_DEBUG="yes", EVALSERVER_RUN_MAX_BYTES="2048",
                              EVALSERVER_TRUSTED_PROXIES="10.0.0.1, 172.16.0.0/12")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ("False True 2048 (IPv4Network('10.0.0.1/32'), "
                                     "IPv4Network('172.16.0.0/12'))")


def test_every_variable_the_settings_read_is_documented() -> None:
    source = (ROOT / "evalserver" / "settings.py").read_text()
    names = set(re.findall(r'env(?:_\w+|\.\w+)\(\s*"([A-Z][A-Z0-9_]+)"', source))
    assert {"DJANGO_SECURE", "EVALSERVER_TRUSTED_PROXIES", "DATABASE_URL"} <= names
    # The configuration page of the documentation site (it left the README, issue 38).
    page = (ROOT / "docs" / "operators" / "configuration.md").read_text()
    assert sorted(name for name in names if f"`{name}`" not in page) == []


@pytest.mark.django_db
def test_web_form_uploads_share_the_upload_rate_per_user(world: World, settings) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    from tests.conftest import committing, run_bytes

    cache.clear()
    settings.EVALSERVER_UPLOAD_RATE = "2/m"

    def post(user, forwarded: str) -> int:
        client = Client(REMOTE_ADDR="198.51.100.7", HTTP_X_FORWARDED_FOR=forwarded)
        client.force_login(user)
        with committing():
            return client.post(f"/tasks/{world.task.slug}/upload/", {
                "file": SimpleUploadedFile("run.json", run_bytes(world.gold)), "name": "r"}).status_code

    assert [post(world.alice, f"203.0.113.{n}") for n in range(3)] == [302, 302, 429]
    assert post(world.bob, "203.0.113.9") == 302  # per user, not per address
