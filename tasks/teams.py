"""A team's members manage it, and a signed-in person manages their account.

Joining an existing team with its code (the code is the only secret, so guessing it is limited per
address and per account), leaving, the team's owner removing a member, renaming the team and
renewing its join code; the account page changes the password and the e-mail address with
Django's own forms. A team keeps its runs whatever happens to its members, so its last member
cannot leave it (nobody could manage its runs any more)."""

from __future__ import annotations

import unicodedata
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model, update_session_auth_hash
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import PasswordChangeForm
from django.db import IntegrityError, transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST
from django_ratelimit.decorators import ratelimit

from scoring.validation import quoted
from tasks.accounts import _form_message, _lock_team_names, add_member, team_name_problems
from tasks.errors import Rejected
from tasks.hooks import page_sections
from tasks.models import Team
from tasks.submissions import participant_team

JOIN_GROUP = "team-join"
JOIN_LIMITED = "Too many join codes tried. Wait an hour and try again, or ask the team for its code once more."


def _join_rate(group: str, request: HttpRequest) -> str:
    return settings.EVALSERVER_JOIN_RATE


def team_owner(team: Team) -> Any:
    """Who manages the team: its recorded owner while a member, else the member who joined first
    (teams made before owners were recorded, or whose owner left); None for a team without members."""
    if team.owner_id is not None and team.members.filter(pk=team.owner_id).exists():
        return team.owner
    through = Team.members.through
    first = through.objects.filter(team_id=team.pk).order_by("pk").values_list("user_id", flat=True).first()
    return get_user_model().objects.filter(pk=first).first() if first is not None else None


def may_manage(user: Any, team: Team) -> bool:
    """The team's owner, and superusers (who manage every team in the admin anyway)."""
    if user.is_superuser and user.is_active:
        return True
    owner = team_owner(team)
    return owner is not None and owner.pk == user.pk


class JoinForm(forms.Form):
    join_code = forms.CharField(max_length=32, label="Join code", strip=True,
                                help_text="the code your colleagues see on their team page")


class RenameForm(forms.Form):
    name = forms.CharField(max_length=Team._meta.get_field("name").max_length, label="New name", strip=True)

    def __init__(self, *args: Any, team: Team, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.team = team

    def clean_name(self) -> str:
        name = unicodedata.normalize("NFC", self.cleaned_data["name"])
        if name == self.team.name:
            raise forms.ValidationError("That is the team's name already.")
        problems = team_name_problems(name, team_pk=self.team.pk)
        if problems:
            # Not _form_message: its advice to join the existing team is for sign-ups, not renames.
            raise forms.ValidationError([_sentence(problem.removeprefix("team: ")) for problem in problems])
        return name


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


class EmailForm(forms.Form):
    """A new e-mail address, with the current password: whoever finds a signed-in browser must not
    be able to send the password reset to themselves."""

    email = forms.EmailField(label="New e-mail address")
    password = forms.CharField(label="Your current password", strip=False, widget=forms.PasswordInput)

    def __init__(self, *args: Any, user: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.user = user

    def clean_email(self) -> str:
        email = self.cleaned_data["email"].strip()
        if email.lower() == (self.user.email or "").lower():
            raise forms.ValidationError("That is your e-mail address already.")
        return email

    def clean_password(self) -> str:
        password = self.cleaned_data["password"]
        if not self.user.check_password(password):
            raise forms.ValidationError("Your current password was entered incorrectly.")
        return password


def _confirm(request: HttpRequest, title: str, paragraphs: list[str], action: str, fields: list[tuple[str, Any]],
             button: str) -> HttpResponse:
    return render(request, "tasks/confirm.html", {"title": title, "paragraphs": paragraphs, "action": action,
                                                  "fields": fields, "button": button,
                                                  "cancel_url": reverse("team-page"), "cancel": "Cancel"})


@require_http_methods(["GET", "POST"])
@login_required
@ratelimit(key="user", group=JOIN_GROUP, rate=_join_rate, method="POST", block=False)
@ratelimit(key="ip", group=JOIN_GROUP, rate=_join_rate, method="POST", block=False)
def team_join(request: HttpRequest) -> HttpResponse:
    """A signed-in account without a team joins one with its code. A person is in one team (every
    page and upload acts for it), so a member leaves their team first."""
    current = participant_team(request.user)
    form = JoinForm(request.POST or None)
    context: dict[str, Any] = {"form": form, "current": current}
    if request.method == "GET" or current is not None:
        return render(request, "tasks/team_join.html", context, status=200 if request.method == "GET" else 409)
    if getattr(request, "limited", False):
        form.errors.clear()
        return render(request, "tasks/team_join.html", {**context, "limited": JOIN_LIMITED}, status=429)
    if not form.is_valid():
        return render(request, "tasks/team_join.html", context, status=400)
    team = Team.objects.filter(join_code=form.cleaned_data["join_code"]).first()
    if team is None:
        form.add_error("join_code", "No team has this join code. Check it with your colleagues (it changes when "
                                    "the team renews it).")
        return render(request, "tasks/team_join.html", context, status=400)
    try:
        add_member(team, request.user)
    except Rejected as rejected:
        form.add_error("join_code", _form_message(rejected.errors[0]))
        return render(request, "tasks/team_join.html", context, status=409)
    messages.success(request, f"You joined team {team.name}.")
    return redirect("team-page")


@require_POST
@login_required
def team_leave(request: HttpRequest) -> HttpResponse:
    team = participant_team(request.user)
    if team is None:
        messages.error(request, "You are not in a team.")
        return redirect("team-page")
    if team.members.count() == 1:
        messages.error(request, f"You are the only member of {team.name}: a team keeps its runs, so its last member "
                                "cannot leave it. Ask a colleague to join with the join code first, or ask the "
                                "organisers.")
        return redirect("team-page")
    if request.POST.get("confirm") != "yes":
        return _confirm(request, f"Leave team {team.name}?", [
            "You stop being a member at once: you no longer see the team's runs that are not public, cannot upload "
            "for it, and your API token acts for no team until you join one.",
            "The team's runs stay as they are (including those you uploaded). To come back you need its join code."],
            reverse("team-leave"), [], "Leave the team")
    with transaction.atomic():
        team.members.remove(request.user)
    messages.success(request, f"You left team {team.name}.")
    return redirect("team-page")


@require_POST
@login_required
def team_remove_member(request: HttpRequest) -> HttpResponse:
    team = participant_team(request.user)
    if team is None or not may_manage(request.user, team):
        messages.error(request, "Only the team's owner can remove members.")
        return redirect("team-page")
    username = request.POST.get("username", "")
    # Matched among the team's few members here, not in SQL: a posted name may hold characters
    # PostgreSQL's text cannot (NUL), and the message quotes it shortened to one line.
    member = next((user for user in team.members.all() if user.username == username), None)
    if member is None:
        messages.error(request, f"{quoted(username)} is not a member of {team.name}.")
        return redirect("team-page")
    if member.pk == request.user.pk:
        messages.error(request, "To leave the team yourself, use “Leave the team”.")
        return redirect("team-page")
    if request.POST.get("confirm") != "yes":
        return _confirm(request, f"Remove {member.username} from {team.name}?", [
            f"{member.username} stops being a member at once and can no longer upload for the team or see its runs "
            "that are not public. The runs they uploaded stay the team's.",
            "They can join again only with the join code: renew it below if they should not."],
            reverse("team-remove-member"), [("username", member.username)], "Remove the member")
    team.members.remove(member)
    messages.success(request, f"{member.username} is no longer a member of {team.name}.")
    return redirect("team-page")


@require_POST
@login_required
def team_rename(request: HttpRequest) -> HttpResponse:
    team = participant_team(request.user)
    if team is None or not may_manage(request.user, team):
        messages.error(request, "Only the team's owner can rename the team.")
        return redirect("team-page")
    form = RenameForm(request.POST, team=team)
    try:
        with transaction.atomic():
            _lock_team_names()  # two renames at once cannot both take confusable names
            if not form.is_valid():
                return render(request, "tasks/team_rename.html", {"form": form, "team": team}, status=400)
            old = team.name
            team.name = form.cleaned_data["name"]
            team.save(update_fields=["name"])  # the boards of its tasks show the new name (tasks.signals)
    except IntegrityError:
        form.add_error("name", f"A team named {form.cleaned_data['name']!r} exists already.")
        return render(request, "tasks/team_rename.html", {"form": form, "team": team}, status=400)
    messages.success(request, f"Team {old} is now called {team.name}; every board shows the new name.")
    return redirect("team-page")


@require_POST
@login_required
@never_cache
def team_new_code(request: HttpRequest) -> HttpResponse:
    team = participant_team(request.user)
    if team is None or not may_manage(request.user, team):
        messages.error(request, "Only the team's owner can renew the join code.")
        return redirect("team-page")
    if request.POST.get("confirm") != "yes":
        return _confirm(request, "Renew the join code?", [
            "A new join code replaces the current one at once: the old one stops working, for sign-ups and for "
            "accounts joining the team. Members stay members.",
            "Give the new code only to the colleagues who should join."],
            reverse("team-new-code"), [], "Renew the join code")
    Team.objects.filter(pk=team.pk).update(join_code=Team._meta.get_field("join_code").default())
    messages.success(request, "The team has a new join code; the old one no longer works.")
    return redirect("team-page")


@require_http_methods(["GET", "POST"])
@login_required
@never_cache
@ratelimit(key="user", group="account-password", rate=lambda group, request: settings.EVALSERVER_LOGIN_RATE,
           method="POST", block=False)
def account_page(request: HttpRequest) -> HttpResponse:
    """The signed-in person's account: username, e-mail, team; change the password or the e-mail.
    Both forms check the current password, under the sign-in limit (per account): a browser left
    signed in is no oracle for guessing it."""
    which = request.POST.get("form") if request.method == "POST" else None
    if which and getattr(request, "limited", False):
        messages.error(request, "Too many attempts with your current password. Wait a minute and try again.")
        return render(request, "tasks/account.html", {
            "password_form": PasswordChangeForm(request.user), "email_form": EmailForm(user=request.user),
            "team": participant_team(request.user), "sections": page_sections("account", request)}, status=429)
    password_form = PasswordChangeForm(request.user, request.POST if which == "password" else None)
    password_form.fields["old_password"].label = "Your current password"  # the e-mail form's words
    email_form = EmailForm(request.POST if which == "email" else None, user=request.user)
    context = {"password_form": password_form, "email_form": email_form,
               "team": participant_team(request.user), "sections": page_sections("account", request)}
    if which == "password" and password_form.is_valid():
        password_form.save()
        update_session_auth_hash(request, password_form.user)  # stay signed in here, signed out elsewhere
        messages.success(request, "Your password was changed. Other browsers signed in as you are signed out.")
        return redirect("account")
    if which == "email" and email_form.is_valid():
        request.user.email = email_form.cleaned_data["email"]
        request.user.save(update_fields=["email"])
        messages.success(request, f"Your e-mail address is now {request.user.email}.")
        return redirect("account")
    status = 400 if which in ("password", "email") else 200
    if request.method == "POST" and which not in ("password", "email"):
        messages.error(request, "Choose which form to send: the password or the e-mail address.")
    return render(request, "tasks/account.html", context, status=status)


def team_context(user: Any, team: Team | None) -> dict[str, Any]:
    """What the team page adds for managing the team."""
    if team is None:
        return {}
    owner = team_owner(team)
    return {"owner": owner, "manages": may_manage(user, team), "rename_form": RenameForm(team=team),
            "members": list(team.members.order_by("username"))}
