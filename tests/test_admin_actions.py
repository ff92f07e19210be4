"""The Django admin's bulk actions: re-scoring every run of tasks is confirmed on an intermediate
page (as the organiser dashboard's re-score is), logged, and only for staff who may change tasks."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client, TestCase
from django.utils import timezone

from tasks import organising, submissions
from tasks.models import AccessLog, Run
from tests.conftest import World, committing, make_world, run_bytes

CHANGELIST = "/admin/tasks/task/"


def signed_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def submit(world: World, task: Any, user: Any, seed: int, name: str) -> Run:
    with committing():
        return submissions.submit_run(task, user, submissions.Submission(
            content=run_bytes(world.gold, 0.3, seed), name=name, is_public=True), None)


@pytest.fixture
def two_tasks(db: Any) -> dict[str, Any]:
    """The demo task with three runs (one failed), and another task with one run that is never selected."""
    world = make_world()
    other = organising.create_task("other-task", "stc3", "Other task")
    with committing():
        organising.load_gold_version(other, orjson.dumps(world.gold), "gold.json", world.organiser)
    runs = [submit(world, world.task, world.alice, 1, "a1"), submit(world, world.task, world.alice, 2, "a2"),
            submit(world, world.task, world.bob, 3, "b1")]
    Run.objects.filter(pk=runs[2].pk).update(status=Run.FAILED)
    withdrawn = submit(world, world.task, world.bob, 5, "withdrawn")
    Run.objects.filter(pk=withdrawn.pk).update(withdrawn_at=timezone.now())
    outside = submit(world, other, world.bob, 4, "elsewhere")
    baselines = list(Run.objects.filter(task=world.task, is_baseline=True))
    assert len(baselines) == 2 and {run.status for run in baselines} == {Run.DONE}
    return {"world": world, "other": other, "runs": runs, "outside": outside, "withdrawn": withdrawn,
            "baselines": baselines}


def action(task_pks: list[int], **extra: str) -> dict[str, Any]:
    return {"action": "rescore_all", "_selected_action": [str(pk) for pk in task_pks], **extra}


@pytest.mark.django_db
def test_rescoring_every_run_of_tasks_in_the_admin_asks_first(two_tasks: dict[str, Any]) -> None:
    world = two_tasks["world"]
    staff = signed_in(world.staff)
    before = dict(Run.objects.values_list("pk", "status"))
    assert set(before.values()) == {Run.DONE, Run.FAILED}
    with TestCase.captureOnCommitCallbacks(execute=False) as sent:
        page = staff.post(CHANGELIST, action([world.task.pk]))
    assert page.status_code == 200 and sent == []
    text = page.content.decode()
    # demo-task, as on the dashboard: 2 done (a1, a2), 1 failed (b1) and the 2 baselines (done);
    # the withdrawn run is left alone.
    assert "<td>demo-task</td><td>5</td><td>0 queued, 0 scoring, 4 done, 1 failed</td>" in text
    assert "other-task" not in text
    assert '<input type="hidden" name="post" value="yes">' in text
    assert f'<input type="hidden" name="_selected_action" value="{world.task.pk}">' in text
    assert 'value="Yes, re-score 5 runs"' in text
    assert dict(Run.objects.values_list("pk", "status")) == before  # nothing queued
    assert not AccessLog.objects.filter(what__startswith="re-scored").exists()

    with TestCase.captureOnCommitCallbacks(execute=False) as sent:
        done = staff.post(CHANGELIST, action([world.task.pk], post="yes"))
    assert done.status_code == 302 and done["Location"] == CHANGELIST
    assert len(sent) == 5  # one scoring job for each run
    after = dict(Run.objects.values_list("pk", "status"))
    queued = {pk for pk, status in after.items() if status == Run.QUEUED}
    assert queued == {run.pk for run in two_tasks["runs"] + two_tasks["baselines"]}
    assert after[two_tasks["outside"].pk] == Run.DONE
    assert after[two_tasks["withdrawn"].pk] == before[two_tasks["withdrawn"].pk]
    assert all(after[pk] == before[pk] for pk in after if pk not in queued)
    log = AccessLog.objects.get(what__startswith="re-scored")
    assert (log.task, log.user, log.what) == (world.task, world.staff, "re-scored 5 runs (every phase, admin)")
    assert "5 run(s) queued for re-scoring." in staff.get(CHANGELIST).content.decode()


@pytest.mark.django_db
def test_the_admin_rescore_confirmation_counts_per_task(two_tasks: dict[str, Any]) -> None:
    world = two_tasks["world"]
    page = signed_in(world.staff).post(CHANGELIST, action([two_tasks["other"].pk, world.task.pk])).content.decode()
    # other-task: its run and its two baselines.
    assert page.index("<td>demo-task</td><td>5</td>") < page.index("<td>other-task</td><td>3</td><td>0 queued, "
                                                                    "0 scoring, 3 done, 0 failed</td>")
    assert 'value="Yes, re-score 8 runs"' in page


@pytest.mark.django_db
def test_only_staff_who_may_change_tasks_reach_the_admin_rescore(two_tasks: dict[str, Any]) -> None:
    world = two_tasks["world"]
    before = dict(Run.objects.values_list("pk", "status"))
    for user in (None, world.alice, world.organiser):  # anonymous, participant, organiser (not staff)
        client = signed_in(user) if user else Client()
        with TestCase.captureOnCommitCallbacks(execute=False) as sent:
            refused = client.post(CHANGELIST, action([world.task.pk], post="yes"))
        assert refused.status_code == 302 and refused["Location"].startswith("/admin/login/")
        assert sent == []
    # A staff member who may only view tasks sees the list but not the action, and cannot post it.
    viewer = get_user_model().objects.create_user("vera", password="viewer-pass-1", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_task"))
    client = signed_in(viewer)
    assert client.get(CHANGELIST).status_code == 200
    assert "rescore_all" not in client.get(CHANGELIST).content.decode()
    with TestCase.captureOnCommitCallbacks(execute=False) as sent:
        refused = client.post(CHANGELIST, action([world.task.pk], post="yes"))
    assert sent == [] and refused.status_code == 200  # the list again: the viewer has no actions to run
    assert dict(Run.objects.values_list("pk", "status")) == before
    assert not AccessLog.objects.filter(what__startswith="re-scored").exists()


@pytest.mark.django_db
def test_a_nul_character_in_an_admin_list_filter_is_a_400_naming_the_parameter(world: World) -> None:
    staff = signed_in(world.staff)
    for url, name in (("/admin/tasks/run/?status__exact=a%00b", "status__exact"),
                      ("/admin/tasks/phase/?kind__exact=%00", "kind__exact"),
                      ("/admin/tasks/score/?scope__exact=full%00", "scope__exact"),
                      ("/admin/tasks/team/?q=Aur%00ora", "q")):
        answer = staff.get(url)
        assert answer.status_code == 400, url
        assert answer.content.decode() == f"the parameter {name!r} of the address contains a NUL character"
    assert staff.get("/admin/tasks/run/?status__exact=done").status_code == 200
    assert staff.get("/admin/tasks/team/?q=Aurora").status_code == 200


@pytest.mark.django_db
def test_a_phase_cannot_score_on_another_tasks_gold_and_the_admin_offers_only_its_own(
        two_tasks: dict[str, Any]) -> None:
    from django.core.exceptions import ValidationError

    from tasks.models import Phase

    world, other = two_tasks["world"], two_tasks["other"]
    foreign = other.gold_versions.get()
    phase = Phase(task=world.task, name="dev", kind=Phase.DEVELOPMENT, gold_version=foreign,
                  starts_at=timezone.now(), ends_at=timezone.now() + timezone.timedelta(days=1))
    with pytest.raises(ValidationError) as raised:
        phase.full_clean()
    assert raised.value.message_dict["gold_version"] == [
        "other-task gold v1 is a gold version of another task; choose one of demo-task's versions"]
    phase.gold_version = world.gold_version
    phase.save()
    staff = signed_in(world.staff)
    page = staff.get(f"/admin/tasks/phase/{phase.pk}/change/")
    assert page.status_code == 200
    options = page.context["adminform"].form.fields["gold_version"].queryset
    assert list(options) == [world.gold_version]
    data = {"task": world.task.pk, "name": "dev", "kind": Phase.DEVELOPMENT, "gold_version": foreign.pk,
            "starts_at_0": "2026-01-01", "starts_at_1": "00:00:00", "ends_at_0": "2027-01-01",
            "ends_at_1": "00:00:00", "daily_quota": 5, "total_quota": 50, "live_subset_size": 0,
            "live_subset_seed": 0}
    added = staff.post("/admin/tasks/phase/add/", data)
    assert added.status_code == 200  # the form again, with the error, and no phase stored
    assert "is a gold version of another task" in added.content.decode()
    assert Phase.objects.filter(task=world.task).count() == 1
