"""``manage.py create_participant USERNAME --team TEAM``: account, team and API token."""

import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from django.utils.text import slugify
from rest_framework.authtoken.models import Token

from tasks.models import Team


class Command(BaseCommand):
    help = "Create a participant account in a team (created if needed) and print its API token last."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--team", required=True)
        parser.add_argument("--email", default="")
        parser.add_argument("--password", default=None, help="default: a random one, printed once")

    def handle(self, *args: Any, **options: Any) -> None:
        users = get_user_model()
        username, team_name = options["username"].strip(), options["team"].strip()
        if not username or users.objects.filter(username=username).exists():
            raise CommandError(f"user {username!r} exists already or is empty", returncode=2)
        slug = slugify(team_name)[:50]
        if len(slug) < 3:
            raise CommandError("team name needs at least 3 letters or digits", returncode=2)
        password = options["password"] or secrets.token_urlsafe(12)
        with transaction.atomic():
            user = users.objects.create_user(username=username, email=options["email"], password=password)
            team = Team.objects.filter(name=team_name).first() or Team.objects.create(name=team_name, slug=slug)
            team.members.add(user)
            token = Token.objects.create(user=user)
        self.stdout.write(f"user {username} in team {team.name}")
        if not options["password"]:
            self.stdout.write(f"password: {password}")
        self.stdout.write(token.key)
