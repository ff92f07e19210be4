"""Sign-up: a new account that creates a team or joins one with its join code."""

from __future__ import annotations

import secrets
from typing import Any

from django import forms
from django.conf import settings
from django.contrib.auth import get_user_model, login
from django.contrib.auth.forms import UserCreationForm
from django.db import IntegrityError, transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.text import slugify
from django.views.decorators.http import require_http_methods
from django_ratelimit.decorators import ratelimit

from tasks.models import Team

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


def create_team(name: str, approved: bool = True) -> Team:
    """A new team, or ``Rejected`` saying why not (the name or its URL name is taken)."""
    from tasks.services import Rejected

    slug = team_slug(name)
    if slug is None:
        raise Rejected([f"team: a team name needs at least {MIN_TEAM_NAME_CHARACTERS} letters or digits"])
    if Team.objects.filter(name__iexact=name).exists() or Team.objects.filter(slug=slug).exists():
        raise Rejected([f"team: a team named {name!r} (or one whose URL name is {slug!r}) exists already"])
    try:
        with transaction.atomic():
            return Team.objects.create(name=name, slug=slug, approved=approved)
    except IntegrityError:  # created a moment ago by a concurrent request
        raise Rejected([f"team: a team named {name!r} exists already"]) from None


class SignUpForm(UserCreationForm):
    email = forms.EmailField(required=True)
    team_name = forms.CharField(max_length=100, required=False, label="New team",
                                help_text="create a team with this name, or")
    join_code = forms.CharField(max_length=32, required=False, label="Join code",
                                help_text="join an existing team with the code its members see on their team page")

    class Meta(UserCreationForm.Meta):
        model = get_user_model()
        fields = ("username", "email")

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        team_name = (data.get("team_name") or "").strip()
        join_code = (data.get("join_code") or "").strip()
        if bool(team_name) == bool(join_code):
            raise forms.ValidationError("Give either the name of a new team or the join code of an existing one.")
        if team_name:
            slug = team_slug(team_name)
            if slug is None:
                self.add_error("team_name", f"A team name needs at least {MIN_TEAM_NAME_CHARACTERS} letters or "
                                            "digits.")
            elif Team.objects.filter(name__iexact=team_name).exists() or Team.objects.filter(slug=slug).exists():
                self.add_error("team_name", "A team with this name exists; ask its members for the join code.")
        else:
            team = Team.objects.filter(join_code=join_code).first()
            if team is None:
                self.add_error("join_code", "No team has this join code.")
            data["team"] = team
        data["team_name"] = team_name
        return data


@ratelimit(key="ip", rate=settings.EVALSERVER_SIGNUP_RATE, method="POST", block=False)
@require_http_methods(["GET", "POST"])
def signup(request: HttpRequest) -> HttpResponse:
    if not settings.EVALSERVER_SIGNUP_OPEN:
        raise Http404("sign-up is closed; ask an organiser for an account")
    if request.method == "POST" and getattr(request, "limited", False):
        return render(request, "registration/signup.html", {"form": SignUpForm(), "limited": True}, status=429)
    form = SignUpForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        from tasks.services import Rejected

        try:
            with transaction.atomic():
                user = form.save()
                team = form.cleaned_data.get("team")
                if team is None:
                    team = create_team(form.cleaned_data["team_name"],
                                       approved=not settings.EVALSERVER_TEAMS_NEED_APPROVAL)
                team.members.add(user)
        except Rejected:
            # Another sign-up took the team name between the check and now: nothing was kept.
            form.add_error("team_name", "A team with this name exists; ask its members for the join code.")
        except IntegrityError:
            form.add_error("username", "A user with that username already exists.")
        else:
            login(request, user, backend="django.contrib.auth.backends.ModelBackend")
            return redirect("team-page")
    return render(request, "registration/signup.html", {"form": form}, status=400 if form.errors else 200)
