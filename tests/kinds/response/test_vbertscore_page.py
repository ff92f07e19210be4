# ruff: noqa: F811
"""The organiser's vBLEU page says what vBERTScore is, and how it differs from the paper, on a task that
reports BERTScore (issue 29); on any other task it says nothing of it."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.kinds.response.test_vbleu_server import build, planted, task_with_runs  # noqa: F401


@pytest.mark.django_db
def test_the_vbleu_page_explains_vbertscore_only_where_bertscore_is_reported(task_with_runs):
    task = task_with_runs["task"]
    client = Client()
    client.force_login(task_with_runs["organiser"])
    page = client.get(f"/organiser/{task.slug}/vbleu/")
    assert page.status_code == 200 and b"vBERTScore" not in page.content
    task.config = {**task.config, "measures": [*task.config["measures"], "bertscore"]}
    task.save()
    page = client.get(f"/organiser/{task.slug}/vbleu/").content.decode()
    assert "<strong>vBERTScore</strong> (Tsuta et al. 2023, section 4.3, eq. 11-12)" in page
    assert "not with a fine-tuned BERT" in page and "multilingual-e5-small" in page
