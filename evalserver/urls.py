"""URL configuration: public leaderboard pages, participant pages, the API and the admin."""

from django.contrib import admin
from django.urls import path

urlpatterns = [
    path("admin/", admin.site.urls),
]
