"""Where ``python3 dev.py serve`` listens (issue 37, item 11): the address given on the command
line, else GUNICORN_BIND, else 127.0.0.1:8000. The setup steps (virtualenv, migrate, demo) are
replaced by no-ops and gunicorn's exec is caught, so the test reads the command dev.py would run."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def load_dev() -> ModuleType:
    spec = importlib.util.spec_from_file_location("dev_under_test", ROOT / "dev.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Exec(Exception):
    """Raised in place of os.execv: the command gunicorn would have been started with."""


def gunicorn_bind(monkeypatch: pytest.MonkeyPatch, args: list[str], bind: str | None) -> str:
    dev = load_dev()
    monkeypatch.setattr(dev, "ensure_environment", lambda: None)
    monkeypatch.setattr(dev, "manage", lambda *args, **kwargs: None)

    def fake_execv(path: str, argv: list[str]) -> None:
        raise Exec(argv)

    monkeypatch.setattr(dev.os, "execv", fake_execv)
    if bind is None:
        monkeypatch.delenv("GUNICORN_BIND", raising=False)
    else:
        monkeypatch.setenv("GUNICORN_BIND", bind)
    monkeypatch.setenv("DJANGO_SECURE", "false")
    with pytest.raises(Exec) as caught:
        dev.serve(args)
    argv = caught.value.args[0]
    assert argv[argv.index("-c") + 1] == str(ROOT / "gunicorn.conf.py")
    return argv[argv.index("--bind") + 1]


def test_serve_listens_on_loopback_port_8000_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    assert gunicorn_bind(monkeypatch, [], None) == "127.0.0.1:8000"


def test_serve_listens_on_the_address_given(monkeypatch: pytest.MonkeyPatch) -> None:
    assert gunicorn_bind(monkeypatch, ["0.0.0.0:8080"], None) == "0.0.0.0:8080"
    # The command line wins over the variable.
    assert gunicorn_bind(monkeypatch, ["127.0.0.1:9001"], "0.0.0.0:8080") == "127.0.0.1:9001"


def test_serve_honours_gunicorn_bind(monkeypatch: pytest.MonkeyPatch) -> None:
    assert gunicorn_bind(monkeypatch, [], "0.0.0.0:8765") == "0.0.0.0:8765"
    assert gunicorn_bind(monkeypatch, [], "  ") == "127.0.0.1:8000"  # blank: as if unset


def test_serve_refuses_more_than_one_address(monkeypatch: pytest.MonkeyPatch) -> None:
    dev = load_dev()
    monkeypatch.setattr(dev, "ensure_environment", lambda: pytest.fail("set up before the arguments were checked"))
    with pytest.raises(SystemExit) as stopped:
        dev.serve(["127.0.0.1:8000", "8001"])
    assert stopped.value.code == ("dev.py serve takes at most one address (HOST:PORT), not 2 arguments: "
                                  "127.0.0.1:8000 8001")


