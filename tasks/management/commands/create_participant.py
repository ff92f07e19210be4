"""``manage.py create_participant USERNAME --team TEAM``: account, team and API token."""

import secrets
import unicodedata
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from tasks.accounts import MIN_TEAM_NAME_CHARACTERS, create_team, team_slug
from tasks.errors import Rejected
from tasks.models import Team
from tasks.registration import affiliation_problems, set_affiliation
from tasks.tokens import issue_token


class Command(BaseCommand):
    help = "Create a participant account in a team (created if needed) and print its API token last."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--team", required=True)
        parser.add_argument("--email", default="")
        parser.add_argument("--affiliation", default="", help="university, company or lab (shown to organisers)")
        parser.add_argument("--password", default=None, help="default: a random one, printed once")

    def handle(self, *args: Any, **options: Any) -> None:
        users = get_user_model()
        username, team_name = options["username"].strip(), unicodedata.normalize("NFC", options["team"].strip())
        if not username or users.objects.filter(username=username).exists():
            raise CommandError(f"user {username!r} exists already or is empty", returncode=2)
        problems = []
        # The model fields' own validators: their characters and their column lengths (a longer
        # value would fail in the database, after the checks).
        for field, value, validate in (("username", username, users._meta.get_field("username").run_validators),
                                       ("--email", options["email"], users._meta.get_field("email").run_validators)):
            try:
                if value:
                    validate(value)
            except ValidationError as error:
                problems.append(f"{field} {value!r}: {' '.join(error.messages)}")
        affiliation = unicodedata.normalize("NFC", options["affiliation"]).strip()
        if affiliation:
            problems += [f"--affiliation: {problem}" for problem in affiliation_problems(affiliation)]
        if problems:
            raise CommandError("; ".join(problems), returncode=2)
        if team_slug(team_name) is None:
            raise CommandError(f"team name needs at least {MIN_TEAM_NAME_CHARACTERS} letters or digits", returncode=2)
        password = options["password"] or secrets.token_urlsafe(12)
        try:
            with transaction.atomic():
                user = users.objects.create_user(username=username, email=options["email"], password=password)
                team = Team.objects.filter(name=team_name).first() or create_team(team_name)
                team.members.add(user)
                if affiliation:
                    set_affiliation(user, affiliation)
                token = issue_token(user)
        except Rejected as error:
            raise CommandError("; ".join(error.errors) + "; nothing was created", returncode=2) from None
        self.stdout.write(f"user {username} in team {team.name}")
        if not options["password"]:
            self.stdout.write(f"password: {password}")
        self.stdout.write(token)  # stored only as a hash: this is the one time it is shown
