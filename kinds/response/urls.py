"""The response kind's pages, included by the project (``evalserver/urls.py``)."""

from django.urls import path

from kinds.response import views

urlpatterns = [
    path("organiser/<slug:slug>/vbleu/", views.vbleu_page, name="organiser-vbleu"),
    path("organiser/<slug:slug>/encoder/", views.encoder_page, name="organiser-encoder"),
    path("pool-jobs/<int:job_id>/", views.pool_job_page, name="pool-job"),
    path("pool-jobs/<int:job_id>/status.json", views.pool_job_status, name="pool-job-status"),
]
