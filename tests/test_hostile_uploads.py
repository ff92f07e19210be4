"""Every file of the hostile corpus gets a precise 4xx, stores nothing, uses no quota, changes no row."""

from __future__ import annotations

import resource
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.apps import apps
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone
from rest_framework.test import APIClient

from tasks.models import Phase
from tests.conftest import World, committing
from tests.hostile_corpus import CASES, CORPUS_MAX_BYTES


def all_row_counts() -> dict[str, int]:
    return {model._meta.label: model.objects.count() for model in apps.get_models()}


def test_the_corpus_is_large_enough() -> None:
    assert len(CASES) >= 40
    assert len({case.name for case in CASES}) == len(CASES)


@pytest.mark.django_db
@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_hostile_upload_is_refused_cleanly(world: World, settings, case) -> None:
    settings.RUN_UPLOAD_MAX_BYTES = CORPUS_MAX_BYTES
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = CORPUS_MAX_BYTES
    now = timezone.now()
    phase = Phase.objects.create(task=world.task, name="dev", gold_version=world.gold_version,
                                 starts_at=now - timedelta(hours=1), ends_at=now + timedelta(hours=1),
                                 daily_quota=5, total_quota=5)
    content = case.build(world.gold)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {world.alice_token}")
    before, files_before = all_row_counts(), sorted(Path(settings.MEDIA_ROOT).rglob("*"))
    started = time.perf_counter()
    with committing():
        response = client.post(f"/api/v1/tasks/{world.task.slug}/runs/",
                               {"file": SimpleUploadedFile(case.filename, content), **case.fields},
                               format="multipart")
    elapsed = time.perf_counter() - started
    assert response.status_code == case.status, response.content[:500]
    errors = response.json()["errors"]
    assert len(errors) >= case.min_errors
    for fragment in case.expect:
        assert any(fragment in line for line in errors), (fragment, errors[:5])
    assert all(len(line) < 400 for line in errors), "error lines stay short, whatever the input"
    assert all_row_counts() == before
    assert sorted(Path(settings.MEDIA_ROOT).rglob("*")) == files_before
    quota = client.get(f"/api/v1/tasks/{world.task.slug}/my-runs/").json()["quota"]
    assert quota["total_used"] == 0 and quota["phase"] == phase.name
    assert elapsed < 10, f"{case.name} took {elapsed:.1f} s"
    assert not Path("/tmp/evil.json").exists()


def test_parsing_a_deep_or_huge_file_stays_bounded() -> None:
    """The JSON parser's time and memory stay bounded on the worst inputs of the corpus."""
    from scoring import ValidationFailed, parse_json

    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for payload in (b"[" * 1_000_000 + b"]" * 1_000_000, b'{"a":' * 200_000 + b"1" + b"}" * 200_000):
        started = time.perf_counter()
        with pytest.raises(ValidationFailed, match="nested too deeply"):
            parse_json(payload)
        assert time.perf_counter() - started < 5
    growth_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before) / 1024
    assert growth_mb < 200, f"parser grew the peak memory by {growth_mb:.0f} MB"
