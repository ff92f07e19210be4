from django.apps import AppConfig


class TasksConfig(AppConfig):
    name = "tasks"
    verbose_name = "Shared tasks"

    def ready(self) -> None:
        from tasks import signals  # noqa: F401 - connects the receivers
