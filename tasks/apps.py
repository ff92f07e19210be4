from django.apps import AppConfig


class TasksConfig(AppConfig):
    name = "tasks"
    verbose_name = "Shared tasks"

    def ready(self) -> None:
        # Here, not at the top: models can be imported only once the apps are loaded.
        from tasks import signals  # noqa: F401 - connects the receivers
