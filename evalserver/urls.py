"""URL configuration: public leaderboard pages, participant pages, the API and the admin."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

from evalserver.health import healthz
from evalserver.metrics import metrics
from leaderboard import runs as run_views
from leaderboard import statistics_exports, statistics_pages
from leaderboard import views as board_views
from tasks import accounts, organiser, organiser_forms, organiser_late, organiser_round, runlinks, teams
from tasks import api as task_api
from tasks import data as task_data
from tasks import overview as task_overview
from tasks import views as task_views

READ_ONLY = ["get", "head"]
handler400 = "evalserver.errors.bad_request"
handler404 = "evalserver.errors.not_found"
handler500 = "evalserver.errors.server_error"

urlpatterns = [
    path("", board_views.home, name="home"),
    path("measures/", board_views.measures_page, name="measures-page"),
    path("tasks/<slug:slug>/", board_views.task_page, name="task-page"),
    path("tasks/<slug:slug>/leaderboard.csv", board_views.leaderboard_csv, name="leaderboard-csv"),
    path("tasks/<slug:slug>/statistics/", statistics_pages.statistics_page, name="statistics-page"),
    path("tasks/<slug:slug>/statistics/status.json", statistics_pages.statistics_status, name="statistics-status"),
    path("tasks/<slug:slug>/statistics/<str:key>/pvalues/", statistics_pages.pvalues_page, name="pvalues-page"),
    path("tasks/<slug:slug>/statistics/<str:key>/<str:kind>", statistics_exports.statistics_export,
         name="statistics-export"),
    path("tasks/<slug:slug>/upload/", task_views.upload, name="upload"),
    path("tasks/<slug:slug>/overview/", task_overview.overview, name="task-overview"),
    path("tasks/<slug:slug>/terms/", task_overview.accept_terms, name="task-terms"),
    path("tasks/<slug:slug>/data/", task_data.data_page, name="task-data"),
    path("tasks/<slug:slug>/data/<str:name>", task_data.data_file, name="task-data-file"),
    path("organiser/<slug:slug>/", organiser.dashboard, name="organiser-dashboard"),
    path("organiser/<slug:slug>/status.json", organiser.dashboard_status, name="organiser-status"),
    path("organiser/<slug:slug>/preview/", board_views.preview_page, name="organiser-preview"),
    path("organiser/<slug:slug>/rescore/", organiser.rescore, name="organiser-rescore"),
    path("organiser/<slug:slug>/runs.zip", organiser.runs_zip, name="organiser-runs-zip"),
    path("organiser/<slug:slug>/results.<str:fmt>", organiser.results_export, name="organiser-results"),
    # The pages of the kinds' apps (kinds/<kind>/urls.py): the response kind's vBLEU pages.
    path("", include("kinds.response.urls")),
    # Annotation campaigns (campaigns/urls.py): the organisers' campaign pages and the assessors' judging pages.
    path("", include("campaigns.urls")),
    # Notifications, announcements and their feed (notices/urls.py).
    path("", include("notices.urls")),
    path("organiser/<slug:slug>/gold/", organiser_forms.gold_form, name="organiser-gold"),
    path("organiser/<slug:slug>/phase/", organiser_forms.phase_form, name="organiser-phase"),
    path("organiser/<slug:slug>/settings/", organiser_round.settings_page, name="organiser-settings"),
    path("organiser/<slug:slug>/data-files/", organiser_round.data_file_form, name="organiser-data-file"),
    path("organiser/<slug:slug>/withdraw/", organiser_round.withdraw_run, name="organiser-withdraw"),
    path("organiser/<slug:slug>/extensions/", organiser_late.extensions, name="organiser-extensions"),
    path("organiser/<slug:slug>/upload/", organiser_late.upload_for_team, name="organiser-upload-for-team"),
    path("runs/<int:run_id>/", run_views.run_page, name="run-page"),
    path("runs/<int:run_id>/visibility/", task_views.run_visibility, name="run-visibility"),
    path("runs/<int:run_id>/items.csv", run_views.run_items_csv, name="run-items-csv"),
    path("runs/<int:run_id>/compare/", run_views.run_compare, name="run-compare"),
    path("runs/<int:run_id>/details.json", run_views.run_details_json, name="run-details"),
    path("runs/<int:run_id>/file", runlinks.run_file, name="run-file"),
    path("runs/<int:run_id>/links/", runlinks.run_links, name="run-links"),
    path("team/", task_views.team_page, name="team-page"),
    path("team/join/", teams.team_join, name="team-join"),
    path("team/leave/", teams.team_leave, name="team-leave"),
    path("team/remove-member/", teams.team_remove_member, name="team-remove-member"),
    path("team/rename/", teams.team_rename, name="team-rename"),
    path("team/new-code/", teams.team_new_code, name="team-new-code"),
    path("accounts/account/", teams.account_page, name="account"),
    path("team/token/regenerate/", task_views.regenerate_token, name="token-regenerate"),
    path("team/token/revoke/", task_views.revoke_token, name="token-revoke"),
    path("accounts/login/", task_views.LoginView.as_view(), name="login"),
    path("accounts/signup/", accounts.signup, name="signup"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("accounts/password-reset/", task_views.PasswordResetView.as_view(), name="password-reset"),
    path("accounts/password-reset/sent/", task_views.PasswordResetSentView.as_view(), name="password-reset-sent"),
    path("accounts/password-reset/<uidb64>/<token>/", task_views.PasswordResetConfirmView.as_view(),
         name="password-reset-confirm"),
    path("accounts/password-reset/done/", task_views.PasswordResetCompleteView.as_view(),
         name="password-reset-complete"),
    path("api/v1/tasks/", board_views.tasks_api, name="api-tasks"),
    path("api/v1/tasks/<slug:slug>/leaderboard/", board_views.leaderboard_api, name="api-leaderboard"),
    path("api/v1/tasks/<slug:slug>/runs/", task_api.upload_run, name="api-upload"),
    path("api/v1/tasks/<slug:slug>/my-runs/", task_api.my_runs, name="api-my-runs"),
    path("api/v1/tasks/<slug:slug>/gold-versions/", task_api.gold_versions, name="api-gold-versions"),
    path("api/v1/tasks/<slug:slug>/data/", task_data.data_api, name="api-task-data"),
    path("api/v1/tasks/<slug:slug>/data/<str:name>", task_data.data_file_api, name="api-task-data-file"),
    path("api/v1/runs/<int:run_id>/", task_api.run_detail, name="api-run"),
    path("api/v1/runs/<int:run_id>/details/", task_api.run_details, name="api-run-details"),
    # GET only: drf-spectacular's OPTIONS answer on the docs pages fails (it has no template): 405 instead.
    path("api/v1/schema/", SpectacularAPIView.as_view(http_method_names=READ_ONLY), name="api-schema"),
    path("api/v1/docs/", SpectacularSwaggerView.as_view(url_name="api-schema", http_method_names=READ_ONLY),
         name="api-docs"),
    path("api/v1/redoc/", SpectacularRedocView.as_view(url_name="api-schema", http_method_names=READ_ONLY),
         name="api-redoc"),
    # Any character after api/, a newline too (a percent-encoded %0A in a slug: "." stops at it, and
    # such a path fell through to the site's HTML 404 page).
    re_path(r"^api/[\s\S]*$", task_api.not_found, name="api-not-found"),
    path("healthz", healthz, name="healthz"),
    path("metrics", metrics, name="metrics"),
    path("favicon.ico", task_views.favicon, name="favicon"),
    path("client/evalserver_cli.py", task_views.client_download, name="client-download"),
    path("admin/", admin.site.urls),
]
