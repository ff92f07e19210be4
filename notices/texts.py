"""The words of every e-mail, plain text: (subject, body) for one person. Links are absolute, made
from ``EVALSERVER_SITE_URL``: an e-mail is written by a background process, with no request."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from urllib.parse import quote

from django.conf import settings
from django.urls import reverse

from notices.models import CHOICES, MESSAGE, Announcement
from tasks.models import Phase, Run, Task

FIRST_ERRORS = 5


def link(path: str) -> str:
    return settings.EVALSERVER_SITE_URL.rstrip("/") + path


def one_line(text: str) -> str:
    """A subject on one line (a header cannot hold a line break)."""
    return " ".join(text.split())[:250]


def footer(task: Task, topic: str) -> str:
    if topic == MESSAGE:
        return (f"You get this e-mail because you take part in {task.title} on {settings.SITE_NAME}; messages the "
                "organisers write to every participant cannot be turned off.")
    return (f"You get this e-mail because you take part in {task.title} on {settings.SITE_NAME}. To stop e-mails "
            f"{CHOICES[topic]}, untick them on your account page: {link(reverse('account'))}#notifications")


def _letter(person: Any, lines: list[str], task: Task, topic: str) -> str:
    return "\n".join([f"Hello {person.username},", "", *lines, "", "-- ", footer(task, topic), ""])


def _run_words(run: Run) -> str:
    phase = f" in the {run.phase.name} phase" if run.phase_id else ""
    return f'The run "{run.name}" (run {run.pk}) that {run.team.name} submitted to {run.task.title}{phase}'


def run_scored(run: Run, person: Any) -> tuple[str, str]:
    return (one_line(f"{run.task.title}: run {run.name} is scored"),
            _letter(person, [f"{_run_words(run)} is scored.", "",
                             f"Its scores: {link(reverse('run-page', args=[run.pk]))}"], run.task, "run_results"))


def run_failed(run: Run, person: Any) -> tuple[str, str]:
    errors = [str(error) for error in run.errors] or ["no reason was recorded"]
    lines = [f"{_run_words(run)} could not be scored. "
             f"{'The first errors' if len(errors) > 1 else 'The error'}:", ""]
    lines += [f"- {error}" for error in errors[:FIRST_ERRORS]]
    if len(errors) > FIRST_ERRORS:
        lines.append(f"- and {len(errors) - FIRST_ERRORS} more, on the run's page")
    lines += ["", f"The run's page: {link(reverse('run-page', args=[run.pk]))}"]
    return one_line(f"{run.task.title}: run {run.name} failed"), _letter(person, lines, run.task, "run_results")


def duration(delta: timedelta) -> str:
    """A wait in words, to the minute: "24 hours", "1 hour", "23 hours 59 minutes", "5 minutes"."""
    minutes = max(0, int(delta.total_seconds() // 60))
    hours, minutes = divmod(minutes, 60)
    parts = ([f"{hours} hour{'s' if hours != 1 else ''}"] if hours else []) + (
        [f"{minutes} minute{'s' if minutes != 1 else ''}"] if minutes or not hours else [])
    return " ".join(parts)


def phase_reminder(phase: Phase, event: str, at: datetime, now: datetime, person: Any) -> tuple[str, str]:
    task = phase.task
    left = duration(at - now)
    if event == "opens":
        what = f"The {phase.name} phase of {task.title} opens for submissions on {at:%Y-%m-%d} at {at:%H:%M} UTC"
    else:
        what = (f"The {phase.name} phase of {task.title} closes for submissions on {at:%Y-%m-%d} at {at:%H:%M} UTC"
                f"; runs uploaded later are refused")
    return (one_line(f"{task.title}: the {phase.name} phase {event} in {left}"),
            _letter(person, [f"{what} (in {left}).", "",
                             f"The task's overview: {link(reverse('task-overview', args=[task.slug]))}"],
                    task, "phase_reminders"))


def published(phase: Phase, person: Any) -> tuple[str, str]:
    task = phase.task
    board = f"{link(reverse('task-page', args=[task.slug]))}?phase={quote(phase.name)}"
    return (one_line(f"{task.title}: the results of the {phase.name} phase are published"),
            _letter(person, [f"The organisers of {task.title} published the results of the {phase.name} phase: "
                             "its leaderboard now shows the scores on the whole test set and which differences "
                             "between runs are significant.", "", f"The leaderboard: {board}"], task, "publications"))


def announcement(item: Announcement, person: Any) -> tuple[str, str]:
    task = item.task
    return (one_line(f"{task.title}: {item.title}"),
            _letter(person, [f"The organisers of {task.title} announced on {item.created_at:%Y-%m-%d} at "
                             f"{item.created_at:%H:%M} UTC:", "", item.title, "", item.body.strip(), "",
                             f"Every announcement: {link(reverse('task-overview', args=[task.slug]))}#announcements"],
                    task, "announcements"))


def message(task: Task, sender: Any, subject: str, body: str, person: Any) -> tuple[str, str]:
    lines = [f"{sender.username}, an organiser of {task.title}, wrote to every participant:", "", body.strip(), "",
             f"The task's overview: {link(reverse('task-overview', args=[task.slug]))}"]
    if task.contact:
        lines.append(f"Write to the organisers at {task.contact}.")
    return one_line(f"{task.title}: {subject}"), _letter(person, lines, task, MESSAGE)
