"""Sign-up: a new account, with the person's affiliation, that creates a team or joins one with its
join code; signing up from a task's overview also accepts that task's terms (recorded)."""

from __future__ import annotations

import secrets
import unicodedata
from typing import Any

from django import forms
from django.conf import settings
from django.contrib.auth import get_user_model, login
from django.contrib.auth.forms import UserCreationForm
from django.db import IntegrityError, connection, transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.text import slugify
from django.views.decorators.http import require_http_methods
from django_ratelimit.decorators import ratelimit

from tasks import access
from tasks.errors import Rejected
from tasks.models import Task, Team
from tasks.names import character_problems, confusable_with
from tasks.registration import affiliation_problems, record_acceptance, set_affiliation

MIN_TEAM_NAME_CHARACTERS = 2


def team_slug(name: str) -> str | None:
    """The URL name of a new team: its name in ASCII (``Aurora Lab`` -> ``aurora-lab``), or, for a
    name in another script (``清华大学``) or a very short one, ``team-`` and a random suffix. None
    when the name has fewer than two letters or digits (in any script)."""
    if sum(ch.isalnum() for ch in name) < MIN_TEAM_NAME_CHARACTERS:
        return None
    slug = slugify(name).replace("_", "-")[:50].strip("-")
    if len(slug) < 3:
        slug = "-".join(part for part in ("team", slug, secrets.token_hex(3)) if part)
    return slug


RESERVED_TEAM_NAMES = ("baseline",)  # boards show baselines under this owner name


def team_name_problems(name: str, team_pk: int | None = None) -> list[str]:
    """Why ``name`` cannot be a team's name (empty list: it can): invisible or control characters
    (each named with its position), too few letters or digits, or a name that can be mistaken
    for an existing team's (UTS #39 confusable skeletons, ``tasks.names``), site-wide since
    team names identify teams on every board. ``team_pk``: the team being renamed."""
    problems = character_problems(name, "team")
    max_length = Team._meta.get_field("name").max_length
    if len(name) > max_length:
        problems.append(f"team: at most {max_length} characters (got {len(name)})")
    if problems:
        return problems
    slug = team_slug(name)
    if slug is None:
        return [f"team: a team name needs at least {MIN_TEAM_NAME_CHARACTERS} letters or digits"]
    others = Team.objects.exclude(pk=team_pk) if team_pk is not None else Team.objects.all()
    reserved = confusable_with(name, RESERVED_TEAM_NAMES)
    if reserved is not None:
        return [f"team: {name!r} is reserved (the leaderboards show baselines under the name {reserved!r})"]
    other = confusable_with(name, others.values_list("name", flat=True))
    if other is not None:
        same = other.casefold() == name.casefold()
        return [f"team: a team named {other!r} exists already" if same else
                f"team: {name!r} can be mistaken for the existing team {other!r} (Unicode confusables); "
                "choose a name that looks different"]
    if team_pk is None and others.filter(slug=slug).exists():
        return [f"team: a team whose URL name is {slug!r} exists already"]
    return []


def _lock_team_names() -> None:
    """Serialise team creation until the transaction ends, so two concurrent
    requests cannot both add confusable names (the unique constraint only stops identical ones).
    SQLite writes one transaction at a time anyway."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f"LOCK TABLE {Team._meta.db_table} IN SHARE ROW EXCLUSIVE MODE")


def create_team(name: str, approved: bool = True) -> Team:
    """A new team, or ``Rejected`` saying why not (``team_name_problems``)."""
    try:
        with transaction.atomic():
            _lock_team_names()
            problems = team_name_problems(name)
            if problems:
                raise Rejected(problems)
            return Team.objects.create(name=name, slug=team_slug(name), approved=approved)
    except IntegrityError:  # created a moment ago by a concurrent request
        raise Rejected([f"team: a team named {name!r} exists already"]) from None


def team_size_problem(team: Team, joining: int = 1) -> str:
    """Why ``joining`` more people cannot join the team (empty: they can): a task the team has runs
    in allows fewer members per team (``Task.max_team_size``), named with its limit."""
    limited = Task.objects.filter(max_team_size__isnull=False, runs__team=team).distinct().order_by("max_team_size")
    size = team.members.count() + joining
    for task in limited:
        if size > task.max_team_size:
            return (f"Team {team.name} has {team.members.count()} member{'s' if team.members.count() != 1 else ''} "
                    f"and takes part in {task.title}, which allows at most {task.max_team_size} per team: nobody "
                    "more can join it.")
    return ""


def add_member(team: Team, user: Any) -> None:
    """Add a member under the team's row lock, checking the size limit again (two people joining at
    once cannot both take the last place); ``Rejected`` saying why not."""
    with transaction.atomic():
        locked = Team.objects.select_for_update().get(pk=team.pk)
        problem = team_size_problem(locked)
        if problem:
            raise Rejected([f"team: {problem}"])
        locked.members.add(user)


class AffiliationField(forms.CharField):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(max_length=200, label="Affiliation",
                         help_text="your university, company or lab (or 'independent'); organisers see it", **kwargs)

    def clean(self, value: Any) -> str:
        text = unicodedata.normalize("NFC", super().clean(value) or "").strip()
        problems = affiliation_problems(text)
        if problems:
            raise forms.ValidationError([problem[:1].upper() + problem[1:] + "." for problem in problems])
        return text


class SignUpForm(UserCreationForm):
    email = forms.EmailField(required=True)
    affiliation = AffiliationField()
    team_name = forms.CharField(max_length=100, required=False, label="New team",
                                help_text="create a team with this name, or")
    join_code = forms.CharField(max_length=32, required=False, label="Join code",
                                help_text="join an existing team with the code its members see on their team page")
    accept_terms = forms.BooleanField(required=True)

    field_order = ["username", "email", "affiliation", "password1", "password2", "team_name", "join_code",
                   "accept_terms"]

    class Meta(UserCreationForm.Meta):
        model = get_user_model()
        fields = ("username", "email")

    def __init__(self, *args: Any, task: Task | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Signing up from a task with terms: they are shown above the form and accepted with it.
        self.task = task if task is not None and task.terms.strip() else None
        if self.task is None:
            del self.fields["accept_terms"]
        else:
            self.fields["accept_terms"].label = f"I accept the terms of {self.task.title} shown above"

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if self.task is not None and self.data.get("terms_sha256") != self.task.terms_sha256:
            self.add_error("accept_terms", "The terms changed while you were reading them: read them again.")
        team_name = (data.get("team_name") or "").strip()
        join_code = (data.get("join_code") or "").strip()
        if bool(team_name) == bool(join_code):
            raise forms.ValidationError("Give either the name of a new team or the join code of an existing one.")
        if team_name:
            team_name = unicodedata.normalize("NFC", team_name)
            for problem in team_name_problems(team_name):
                self.add_error("team_name", _form_message(problem))
        else:
            team = Team.objects.filter(join_code=join_code).first()
            if team is None:
                self.add_error("join_code", "No team has this join code.")
            else:
                problem = team_size_problem(team)
                if problem:
                    self.add_error("join_code", problem)
            data["team"] = team
        data["team_name"] = team_name
        return data


def _form_message(problem: str) -> str:
    """A ``team: ...`` message as a form error under the field; existing teams are joined by code."""
    message = problem.removeprefix("team: ")
    message = message[:1].upper() + message[1:]
    if "exists already" in message or "can be mistaken" in message:
        message += "; to join an existing team, ask its members for the join code"
    return message + "."


def signup_task(request: HttpRequest) -> Task | None:
    """The task a sign-up comes from (``?task=`` on the link of its overview, a hidden field of the
    form): a task the visitor can see, else none."""
    slug = (request.POST.get("task") or request.GET.get("task") or "").strip()
    if not slug:
        return None
    try:
        return access.get_task_for_user(request.user, slug)
    except Http404:
        return None


@ratelimit(key="ip", rate=settings.EVALSERVER_SIGNUP_RATE, method="POST", block=False)
@require_http_methods(["GET", "POST"])
def signup(request: HttpRequest) -> HttpResponse:
    if not settings.EVALSERVER_SIGNUP_OPEN:
        raise Http404("sign-up is closed; ask an organiser for an account")
    task = signup_task(request)
    context: dict[str, Any] = {"task_signing_up": task}
    if request.method == "POST" and getattr(request, "limited", False):
        return render(request, "registration/signup.html", {**context, "form": SignUpForm(task=task),
                                                            "limited": True}, status=429)
    form = SignUpForm(request.POST or None, task=task)
    if request.method == "POST" and form.is_valid():
        try:
            with transaction.atomic():
                user = form.save()
                set_affiliation(user, form.cleaned_data["affiliation"])
                team = form.cleaned_data.get("team")
                if team is None:
                    team = create_team(form.cleaned_data["team_name"],
                                       approved=not settings.EVALSERVER_TEAMS_NEED_APPROVAL)
                    team.owner = user
                    team.save(update_fields=["owner"])
                    team.members.add(user)
                else:
                    add_member(team, user)
                if form.task is not None:
                    record_acceptance(request, form.task, user)
        except Rejected as rejected:
            # Another sign-up took the team name (or a confusable one) between the check and now:
            # nothing was kept.
            field = "join_code" if form.cleaned_data.get("team") is not None else "team_name"
            for problem in rejected.errors:
                form.add_error(field, _form_message(problem))
        except IntegrityError:
            form.add_error("username", "A user with that username already exists.")
        else:
            login(request, user, backend="django.contrib.auth.backends.ModelBackend")
            if task is not None:
                return redirect("task-overview", slug=task.slug)
            return redirect("team-page")
    return render(request, "registration/signup.html", {**context, "form": form},
                  status=400 if form.errors else 200)
