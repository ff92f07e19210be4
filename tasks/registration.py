"""Registering for a task: a participant's affiliation and the record of accepting a task's terms
(who, when, which text), shared by the sign-up form and the task's overview page."""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction
from django.http import HttpRequest

from evalserver.clientip import client_ip
from tasks.models import Profile, Task, TermsAcceptance
from tasks.names import character_problems

MAX_AFFILIATION = 200


def affiliation_problems(text: str) -> list[str]:
    """Why an affiliation cannot be recorded: invisible or control characters, too long, empty."""
    problems = [problem.removeprefix("affiliation: ") for problem in character_problems(text, "affiliation")]
    if len(text) > MAX_AFFILIATION:
        problems.append(f"at most {MAX_AFFILIATION} characters (got {len(text)})")
    if not text.strip():
        problems.append("say which university, company or lab you belong to (or 'independent')")
    return problems


def set_affiliation(user: Any, affiliation: str) -> Profile:
    profile, _ = Profile.objects.update_or_create(user=user, defaults={"affiliation": affiliation})
    return profile


def record_acceptance(request: HttpRequest, task: Task, user: Any) -> TermsAcceptance:
    """Record that ``user`` accepts the task's current terms: once per version, with the text
    itself, the time, the address and the affiliation given."""
    profile = Profile.objects.filter(user=user).first()
    try:
        with transaction.atomic():
            acceptance, _ = TermsAcceptance.objects.get_or_create(
                task=task, user=user, terms_sha256=task.terms_sha256,
                defaults={"username": user.get_username(), "terms": task.terms.strip(),
                          "affiliation": profile.affiliation if profile else "", "ip_address": client_ip(request)})
    except IntegrityError:  # the same acceptance, recorded a moment ago by another request
        acceptance = TermsAcceptance.objects.get(task=task, user=user, terms_sha256=task.terms_sha256)
    return acceptance
