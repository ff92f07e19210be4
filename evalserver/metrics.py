"""``/metrics``: the server's state in Prometheus' text format, for operators (docs/operators/monitoring.md).

Every figure is read from the database at the scrape, not counted in a process's memory: the
web processes, the scoring workers and the statistics worker are separate processes (on several
hosts with a broker), and an in-process counter would show one process's share and start again
at zero with every restart. prometheus_client writes the format (its names, escaping, histogram
buckets and ``+Inf``); this module only says what to count.

Closed to the public: the answer needs ``Authorization: Bearer <EVALSERVER_METRICS_TOKEN>``;
without the setting ``/metrics`` is off (403), with a wrong or missing token 401.
"""

from __future__ import annotations

import hmac
from collections import Counter, defaultdict
from collections.abc import Iterator

from django.conf import settings
from django.db.models import Count, F, Min, Q
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.http import require_GET
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.utils import floatToGoString

from leaderboard.models import StatisticsState
from scoring.kinds import KINDS
from tasks.heartbeats import WorkerHeartbeat, dead_after
from tasks.models import Run

# Scoring seconds: a DQ/ND run of a few thousand dialogues takes under a second, a response run
# with POSSCORE or BERTScore minutes; the soft time limit (120 s by default) ends the scale.
BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
STATUSES = (Run.QUEUED, Run.SCORING, Run.DONE, Run.FAILED)


class ServerCollector:
    """One scrape's figures, from a handful of queries."""

    def collect(self) -> Iterator[Metric]:
        now = timezone.now()
        kinds = sorted(KINDS)
        live = Run.objects.filter(withdrawn_at__isnull=True)

        runs = GaugeMetricFamily("evalserver_runs", "Runs (not withdrawn) by task kind and status: queued (waiting "
                                 "for a worker), scoring, done, failed.", labels=["kind", "status"])
        counts = Counter({(kind, status): total for kind, status, total in
                          live.values_list("task__kind", "status").annotate(total=Count("pk")).order_by()})
        for kind in kinds:
            for status in STATUSES:
                runs.add_metric([kind, status], counts[(kind, status)])
        yield runs

        oldest = GaugeMetricFamily("evalserver_oldest_queued_run_age_seconds", "Seconds the oldest queued run has "
                                   "waited for a worker, by task kind (0: none waiting).", labels=["kind"])
        first = dict(live.filter(status=Run.QUEUED).values_list("task__kind").annotate(first=Min("queued_at"))
                     .order_by())
        for kind in kinds:
            oldest.add_metric([kind], max(0.0, (now - first[kind]).total_seconds()) if kind in first else 0.0)
        yield oldest

        states = StatisticsState.objects.aggregate(
            waiting=Count("pk", filter=Q(requested__gt=F("completed"), computing__isnull=True)),
            running=Count("pk", filter=Q(computing__isnull=False)))
        yield GaugeMetricFamily("evalserver_statistics_jobs_waiting", "Boards whose significance statistics were "
                                "asked for and are not being computed yet.", value=states["waiting"])
        yield GaugeMetricFamily("evalserver_statistics_jobs_running", "Boards whose significance statistics are "
                                "being computed.", value=states["running"])

        beats = GaugeMetricFamily("evalserver_worker_heartbeat_age_seconds", "Seconds since each background worker "
                                  "(scoring, statistics, celery) last said it was alive; over three heartbeat "
                                  "intervals it counts as gone.", labels=["role", "worker"])
        alive = GaugeMetricFamily("evalserver_workers_alive", "Background workers with a recent heartbeat, by role.",
                                  labels=["role"])
        dead_before = now - dead_after()
        living: Counter[str] = Counter()
        for name, role, beat_at in WorkerHeartbeat.objects.values_list("name", "role", "beat_at").order_by("name"):
            beats.add_metric([role, name], max(0.0, (now - beat_at).total_seconds()))
            living[role] += beat_at >= dead_before
        for role in ("scoring", "statistics", "celery"):
            alive.add_metric([role], living[role])
        yield beats
        yield alive
        yield self.scoring_seconds(kinds)

    @staticmethod
    def scoring_seconds(kinds: list[str]) -> HistogramMetricFamily:
        """Every scored run's last scoring, from its claim to its result (``started_at`` to
        ``finished_at``), as a cumulative histogram per kind."""
        family = HistogramMetricFamily("evalserver_scoring_seconds", "Seconds from a worker taking a run to its "
                                       "scores being stored, per task kind (runs done or failed).", labels=["kind"])
        seconds: dict[str, list[float]] = defaultdict(list)
        for kind, started, finished in (Run.objects.filter(started_at__isnull=False, finished_at__isnull=False,
                                                           status__in=(Run.DONE, Run.FAILED))
                                        .values_list("task__kind", "started_at", "finished_at").order_by()):
            seconds[kind].append(max(0.0, (finished - started).total_seconds()))
        for kind in kinds:
            values = seconds.get(kind, [])
            buckets = [(floatToGoString(bound), sum(value <= bound for value in values)) for bound in BUCKETS]
            family.add_metric([kind], buckets + [("+Inf", len(values))], sum(values))
        return family


def authorised(request: HttpRequest) -> HttpResponse | None:
    """None when the request carries the token, else the answer that refuses it."""
    token = settings.EVALSERVER_METRICS_TOKEN
    if not token:
        return HttpResponse("/metrics is off: set EVALSERVER_METRICS_TOKEN to turn it on\n", status=403,
                            content_type="text/plain; charset=utf-8")
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token.encode()):
        answer = HttpResponse("/metrics needs the header Authorization: Bearer <EVALSERVER_METRICS_TOKEN>\n",
                              status=401, content_type="text/plain; charset=utf-8")
        answer["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return answer
    return None


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    refused = authorised(request)
    if refused is not None:
        return refused
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ServerCollector())
    # The classic text format (0.0.4), which every Prometheus version and agent reads; the names
    # here are plain ASCII, so the newer format's escaping changes nothing in the body.
    answer = HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_PLAIN_0_0_4)
    answer["Cache-Control"] = "no-store"
    return answer
