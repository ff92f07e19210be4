"""The blocks this app adds to the generic pages (``tasks.hooks.add_page_section``): the e-mail
choices on the account page, the announcements on a task's overview, and on the organiser's
dashboard the announcement and message forms with what the outbox did for the task."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Q
from django.http import HttpRequest

from notices.models import CHOICES, Announcement, Email, Preference
from notices.outbox import participants
from notices.views import AnnouncementForm, MessageForm
from tasks.hooks import add_page_section
from tasks.models import Task


def account(request: HttpRequest) -> dict[str, Any] | None:
    if not request.user.is_authenticated:
        return None
    chosen = Preference.objects.filter(user=request.user).first()
    return {"choices": [{"name": name, "words": words, "on": getattr(chosen, name) if chosen else True}
                        for name, words in CHOICES.items()]}


def overview(request: HttpRequest, task: Task) -> dict[str, Any] | None:
    return {"task": task, "announcements": list(Announcement.objects.filter(task=task)[:20])}


def dashboard(request: HttpRequest, task: Task) -> dict[str, Any] | None:
    emails = Email.objects.filter(task=task).aggregate(
        sent=Count("pk", filter=Q(sent_at__isnull=False)),
        waiting=Count("pk", filter=Q(sent_at__isnull=True, gave_up_at__isnull=True)),
        failing=Count("pk", filter=Q(sent_at__isnull=True, gave_up_at__isnull=True, attempts__gt=0)),
        given_up=Count("pk", filter=Q(gave_up_at__isnull=False)))
    people = participants(task)
    return {"task": task, "announcements": list(Announcement.objects.filter(task=task)[:50]),
            "announcement_form": AnnouncementForm(), "message_form": MessageForm(), "emails": emails,
            "participants": len(people), "reachable": sum(1 for person in people if person.email)}


add_page_section("account", "notices/account_section.html", account)
add_page_section("task-overview", "notices/overview_section.html", overview)
add_page_section("organiser-dashboard", "notices/dashboard_section.html", dashboard)
