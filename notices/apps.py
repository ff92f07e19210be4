from django.apps import AppConfig


class NoticesConfig(AppConfig):
    name = "notices"
    verbose_name = "Notifications and announcements"

    def ready(self) -> None:
        # Here, not at the top: models can be imported only once the apps are loaded.
        from notices import receivers, sections  # noqa: F401 - connects the receivers, adds the page sections
