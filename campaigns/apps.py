from django.apps import AppConfig


class CampaignsConfig(AppConfig):
    name = "campaigns"
    label = "campaigns"
    verbose_name = "Annotation campaigns (human judgements)"

    def ready(self) -> None:
        # Here, not at the top: the hooks import the URL resolver, which needs the apps loaded.
        from tasks.hooks import add_organiser_link

        # Every kind a campaign can judge links its dashboard to the task's campaigns.
        for kind in ("stc3", "response", "metric"):
            add_organiser_link(kind, "Annotation campaigns (human judgements, agreement, gold from them)",
                               "campaign-list")
