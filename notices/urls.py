from django.urls import path

from notices import views

urlpatterns = [
    path("accounts/notifications/", views.preferences, name="notices-preferences"),
    path("tasks/<slug:slug>/announcements.atom", views.AnnouncementsFeed(), name="announcements-feed"),
    path("organiser/<slug:slug>/announcements/", views.announce, name="organiser-announce"),
    path("organiser/<slug:slug>/message/", views.write, name="organiser-message"),
]
