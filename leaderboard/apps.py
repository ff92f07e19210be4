from django.apps import AppConfig


class LeaderboardConfig(AppConfig):
    name = "leaderboard"
    verbose_name = "Leaderboard"

    def ready(self) -> None:
        # Here, not at the top: models can be imported only once the apps are loaded.
        from leaderboard import jobs  # noqa: F401 - connects the receivers of tasks.changes
