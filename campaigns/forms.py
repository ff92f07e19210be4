"""The organiser's campaign form: what ``manage.py create_campaign`` takes, checked the same way
(``campaigns.building.create_campaign``), every problem named, nothing stored on one."""

from __future__ import annotations

from typing import Any

from django import forms

from campaigns.building import MAX_ITEMS, Plan
from campaigns.models import KIND_WORDS, KINDS_FOR_TASK
from campaigns.schemes import DEFAULT_RESPONSE_DIMENSIONS
from tasks.models import Run, Task

MAX_UPLOAD = 50 * 1024 * 1024


def _lines(text: str) -> list[str]:
    return [part.strip() for line in text.replace("\x00", "").splitlines() for part in line.split(",") if part.strip()]


class CampaignForm(forms.Form):
    name = forms.CharField(max_length=200, label="Name", help_text="what assessors and the campaign list call it")
    kind = forms.ChoiceField(label="What is judged", widget=forms.RadioSelect)
    gold_version = forms.TypedChoiceField(coerce=int, required=False, label="Gold version",
                                          help_text="whose items (dialogues, references, responses of a metrics task) "
                                                    "are judged; an extended vBLEU version's candidates are references "
                                                    "too")
    dialogues = forms.FileField(required=False, label="Or a file of dialogues (dialogues only)",
                                help_text="JSON, STC-3's test-file shape: [{\"id\", \"turns\": [{\"sender\", "
                                          "\"utterances\"}]}], without annotations: what a new round starts from")
    runs = forms.TypedMultipleChoiceField(coerce=int, required=False, label="Runs whose responses are judged "
                                          "(responses of a response task)", widget=forms.CheckboxSelectMultiple,
                                          help_text="pooled: a text given by several runs (equal after Unicode NFC "
                                                    "and whitespace normalisation) is judged once; assessors never "
                                                    "see run names")
    items = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}), label="Items (optional)",
                            help_text=f"the item ids to judge, one per line or comma-separated; empty: all (at most "
                                      f"{MAX_ITEMS:,} items)")
    dimensions = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}),
                                 initial=DEFAULT_RESPONSE_DIMENSIONS, label="Dimensions (responses only)",
                                 help_text="one per line: NAME MIN-MAX: meaning of MIN | ... | meaning of MAX; add "
                                           "(interval) after the scale to treat it as interval; e.g. USR's or DSTC's "
                                           "dimensions. Dialogues use STC-3's A, E, S and nugget labels; references "
                                           "a 1-5 appropriateness scale")
    per_item = forms.IntegerField(min_value=1, max_value=50, initial=3, label="Judgements per item (k)",
                                  help_text="distinct assessors per item (STC-3 had 19 per dialogue; Tsuta et al. "
                                            "2023 six per response)")
    assessors = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}), label="Assessors",
                                help_text="user names, one per line or comma-separated (more can be added later); a "
                                          "participant never judges their own team's responses")
    checks = forms.FileField(required=False, label="Check items (optional)",
                             help_text="a JSON list of items with a known \"answer\" each: dialogues as in the file "
                                       "of dialogues, their answer with \"quality\" and \"nugget\"; otherwise "
                                       "\"id\", \"context\", \"text\" and the answer's value per dimension; every "
                                       "assessor judges all of them")
    instructions = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}), label="Instructions",
                                   help_text="shown to assessors above every item")
    seed = forms.IntegerField(min_value=0, max_value=2**31 - 1, initial=40, label="Seed",
                              help_text="of the assignment and of each assessor's order")

    def __init__(self, task: Task, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.task = task
        self.fields["kind"].choices = [(kind, KIND_WORDS[kind]) for kind in KINDS_FOR_TASK.get(task.kind, ())]
        self.fields["kind"].initial = self.fields["kind"].choices[0][0] if self.fields["kind"].choices else None
        versions = list(task.gold_versions.order_by("-number"))
        self.fields["gold_version"].choices = [("", "(none)")] + [
            (version.pk, f"version {version.number}{f' ({version.label})' if version.label else ''}")
            for version in versions]
        self.fields["gold_version"].initial = versions[0].pk if versions else ""
        runs = Run.objects.filter(task=task, status=Run.DONE, is_baseline=False).select_related("team")
        self.fields["runs"].choices = [(run.pk, f"{run.label} ({run.team.name if run.team_id else 'organisers'})")
                                       for run in runs.order_by("pk")[:500]]
        if task.kind != "response":
            del self.fields["runs"]
        if task.kind != "stc3":
            del self.fields["dialogues"]
        if "responses" not in KINDS_FOR_TASK.get(task.kind, ()):
            del self.fields["dimensions"]  # dialogues and references have their papers' schemes

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        for name in ("dialogues", "checks"):
            upload = data.get(name)
            if upload is not None and upload.size > MAX_UPLOAD:
                self.add_error(name, f"at most {MAX_UPLOAD // 1024 // 1024} MB")
        return data

    def plan(self) -> Plan:
        data = self.cleaned_data
        chosen = data.get("gold_version")
        version = self.task.gold_versions.filter(pk=chosen).first() if chosen else None
        runs = list(Run.objects.filter(task=self.task, pk__in=data.get("runs") or []))
        upload, checks = data.get("dialogues"), data.get("checks")
        return Plan(name=data["name"], kind=data["kind"], per_item=data["per_item"],
                    instructions=data.get("instructions", ""), dimensions=data.get("dimensions", ""),
                    gold_version=None if upload else version, dialogues=upload.read() if upload else None,
                    runs=runs, item_ids=_lines(data.get("items", "")), checks=checks.read() if checks else None,
                    assessors=_lines(data.get("assessors", "")), seed=data["seed"])
