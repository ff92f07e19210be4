"""The documentation site builds with ``mkdocs build --strict`` (issue 38, item 3): a broken link,
a missing anchor or a page left out of the navigation (mkdocs.yml's ``validation``) is a warning,
and strict mode turns any warning into a failed build, so it fails the suite and CI."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import IN_CI

ROOT = Path(__file__).resolve().parent.parent
MKDOCS_YML = ROOT / "mkdocs.yml"


def build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None:
        if IN_CI:
            pytest.fail("mkdocs and mkdocs-material (the dev extras) are not installed, and CI=true forbids skipping")
        pytest.skip("mkdocs and mkdocs-material (the dev extras) are not installed")
    # NO_MKDOCS_2_WARNING: Material's notice about its end of life, printed on every build.
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
                           "--site-dir", str(site)], capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={"PATH": "/usr/bin:/bin", "NO_MKDOCS_2_WARNING": "1", "LANG": "C.UTF-8"})


def test_the_site_builds_without_a_warning(tmp_path: Path) -> None:
    result = build(MKDOCS_YML, tmp_path / "site")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert not re.search(r"^WARNING", output, re.MULTILINE), output[-4000:]
    for page in ("index.html", "participants/index.html", "organisers/index.html", "operators/index.html",
                 "developers/index.html", "statistics/index.html", "response/index.html", "vbleu/index.html"):
        assert (tmp_path / "site" / page).is_file(), page


def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    """The site's own settings (strict, validation) on a one-page site with a planted broken link
    and a missing anchor: the build must fail, naming both."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\n## Here\n\nSee [a page](nowhere.md) and [a part](#not-here).\n")
    (docs / "left-out.md").write_text("# Not in the navigation\n")
    config = MKDOCS_YML.read_text()
    config = re.sub(r"^docs_dir: .*$", f"docs_dir: {docs}", config, flags=re.MULTILINE)
    config = config.split("\nnav:\n")[0] + "\nnav:\n  - Home: index.md\n"
    (tmp_path / "mkdocs.yml").write_text(config)
    result = build(tmp_path / "mkdocs.yml", tmp_path / "site")
    output = result.stdout + result.stderr
    assert result.returncode != 0, output[-4000:]
    assert "contains a link 'nowhere.md', but the target is not found among documentation files" in output, output
    assert "'#not-here'" in output, output
    assert "left-out.md" in output, output
