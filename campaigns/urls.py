"""The campaigns' pages, included by the project (``evalserver/urls.py``)."""

from django.urls import path

from campaigns import judging, views

urlpatterns = [
    path("organiser/<slug:slug>/campaigns/", views.campaign_list, name="campaign-list"),
    path("campaigns/<int:campaign_id>/", views.campaign_page, name="campaign-page"),
    path("campaigns/<int:campaign_id>/judgements.<str:fmt>", views.export, name="campaign-export"),
    path("campaigns/<int:campaign_id>/metrics-gold.json", views.metrics_gold, name="campaign-metrics-gold"),
    path("judging/", judging.my_campaigns, name="judging"),
    path("campaigns/<int:campaign_id>/judge/", judging.judge, name="campaign-judge"),
    path("campaigns/<int:campaign_id>/judge/<int:position>/", judging.answer, name="campaign-answer"),
]
