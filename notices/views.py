"""The pages of notifications and announcements: a participant's e-mail choices (a form on the
account page), the organisers' announcements and messages (forms on the dashboard), the Atom feed
of a task's announcements. Every form says what is wrong and stores nothing then."""

from __future__ import annotations

import unicodedata
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.syndication.views import Feed
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.feedgenerator import Atom1Feed
from django.utils.html import linebreaks
from django.views.decorators.http import require_POST

from notices import texts
from notices.models import ANNOUNCEMENTS, CHOICES, MESSAGE, Announcement, Preference
from notices.outbox import participants, record
from tasks import access
from tasks.models import Task


def organised_task(request: HttpRequest, slug: str) -> Task:
    """The task if the user organises it (or is staff); 404 for everyone else, as the dashboard."""
    task = Task.objects.filter(slug=slug).first() if "\x00" not in slug else None
    if task is None or not task.is_organiser(request.user):
        raise Http404("no such task")
    return task


def _text(value: str) -> str:
    return unicodedata.normalize("NFC", value.replace("\x00", "")).replace("\r\n", "\n").strip()


class PreferenceForm(forms.Form):
    """One box per e-mail a participant may turn off (``notices.models.CHOICES``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name, words in CHOICES.items():
            self.fields[name] = forms.BooleanField(required=False, label=f"E-mail me {words}")


@require_POST
@login_required
def preferences(request: HttpRequest) -> HttpResponse:
    form = PreferenceForm(request.POST)
    form.is_valid()  # boxes: always valid (an unticked box is absent, i.e. off)
    Preference.objects.update_or_create(user=request.user, defaults={name: form.cleaned_data.get(name, False)
                                                                     for name in CHOICES})
    chosen = [words for name, words in CHOICES.items() if form.cleaned_data.get(name)]
    messages.success(request, "Your e-mail choices are saved: " + (
        "you get e-mails " + "; ".join(chosen) + "." if chosen else "you get no notifications (only messages "
                                                                    "the organisers write to every participant)."))
    return redirect(reverse("account") + "#notifications")


class AnnouncementForm(forms.Form):
    title = forms.CharField(max_length=200, label="Title")
    body = forms.CharField(max_length=10_000, widget=forms.Textarea(attrs={"rows": 6}), label="Announcement")
    email = forms.BooleanField(required=False, initial=True,
                               label="Also e-mail it to the participants who want announcements")

    def clean_title(self) -> str:
        return " ".join(_text(self.cleaned_data["title"]).split())

    def clean_body(self) -> str:
        return _text(self.cleaned_data["body"])


class MessageForm(forms.Form):
    subject = forms.CharField(max_length=200, label="Subject")
    body = forms.CharField(max_length=20_000, widget=forms.Textarea(attrs={"rows": 6}), label="Message")
    confirm = forms.BooleanField(label="Send it to every participant now (one e-mail each; nobody sees the "
                                       "others' addresses)")

    def clean_subject(self) -> str:
        return " ".join(_text(self.cleaned_data["subject"]).split())

    def clean_body(self) -> str:
        return _text(self.cleaned_data["body"])


def _form_problems(form: forms.Form) -> str:
    return " ".join(f"{form.fields[name].label if name in form.fields else name}: {' '.join(problems)}"
                    for name, problems in form.errors.items())


@require_POST
@login_required
def announce(request: HttpRequest, slug: str) -> HttpResponse:
    """Post an announcement (``action=post``) or take one down (``action=delete`` with ``id``)."""
    task = organised_task(request, slug)
    back = redirect(reverse("organiser-dashboard", args=[task.slug]) + "#announcements")
    if request.POST.get("action") == "delete":
        raw = request.POST.get("id", "")
        item = (Announcement.objects.filter(task=task, pk=int(raw)).first()
                if raw.isascii() and raw.isdigit() and len(raw) < 19 else None)
        if item is None:
            messages.error(request, "No such announcement of this task.")
        elif request.POST.get("confirm") != "yes":
            messages.error(request, f"“{item.title}” was not taken down: tick the box beside it first.")
        else:
            with transaction.atomic():
                item.delete()
                access.log_access(request, task, f"took down the announcement {item.title!r}")
            messages.success(request, f"“{item.title}” is taken down (e-mails already sent stay sent).")
        return back
    form = AnnouncementForm(request.POST)
    if not form.is_valid():
        messages.error(request, "The announcement was not posted. " + _form_problems(form))
        return back
    with transaction.atomic():
        item = Announcement.objects.create(task=task, title=form.cleaned_data["title"],
                                           body=form.cleaned_data["body"], author=request.user)
        if form.cleaned_data["email"]:
            item.recipients = record(participants(task), ANNOUNCEMENTS, task,
                                     lambda person: texts.announcement(item, person))
            item.save(update_fields=["recipients"])
        access.log_access(request, task, f"posted the announcement {item.title!r}")
    mailed = (f" It is e-mailed to {item.recipients} participant{'s' if item.recipients != 1 else ''}."
              if form.cleaned_data["email"] else " It is not e-mailed.")
    messages.success(request, f"“{item.title}” is posted on the task's overview and in its feed.{mailed}")
    return back


@require_POST
@login_required
def write(request: HttpRequest, slug: str) -> HttpResponse:
    """Write to every participant of the task: one e-mail per person, through the outbox."""
    task = organised_task(request, slug)
    back = redirect(reverse("organiser-dashboard", args=[task.slug]) + "#message")
    form = MessageForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Nothing was sent. " + _form_problems(form))
        return back
    subject, body = form.cleaned_data["subject"], form.cleaned_data["body"]
    with transaction.atomic():
        sent = record(participants(task), MESSAGE, task,
                      lambda person: texts.message(task, request.user, subject, body, person))
        access.log_access(request, task, f"wrote to {sent} participants: {subject!r}")
    if sent:
        messages.success(request, f"“{subject}” is on its way to {sent} participant{'s' if sent != 1 else ''}, "
                                  "one e-mail each.")
    else:
        messages.error(request, "Nobody to write to yet: no participant with an e-mail address has accepted the "
                                "terms or submitted a run.")
    return back


class AnnouncementsFeed(Feed):
    """The task's announcements as an Atom feed, for whoever may see the task (a public task's
    feed is public; a hidden task's is its organisers' only)."""

    feed_type = Atom1Feed

    def get_object(self, request: HttpRequest, slug: str) -> Task:
        return access.get_task_for_user(request.user, slug)

    def title(self, task: Task) -> str:
        return f"{task.title}: announcements"

    def link(self, task: Task) -> str:
        return reverse("task-overview", args=[task.slug])

    def subtitle(self, task: Task) -> str:
        return f"What the organisers of {task.title} announce, newest first."

    def items(self, task: Task) -> Any:
        return Announcement.objects.filter(task=task).select_related("author")[:50]

    def item_title(self, item: Announcement) -> str:
        return item.title

    def item_description(self, item: Announcement) -> str:
        # Atom's summary is HTML to the reader: the organisers' plain text, escaped, in paragraphs.
        return linebreaks(item.body, autoescape=True)

    def item_link(self, item: Announcement) -> str:
        return f"{reverse('task-overview', args=[item.task.slug])}#announcement-{item.pk}"

    def item_pubdate(self, item: Announcement) -> Any:
        return item.created_at

    def item_updateddate(self, item: Announcement) -> Any:
        return item.created_at

    def item_author_name(self, item: Announcement) -> str:
        return "the organisers"
