"""What a kind's server app adds to the generic pages, registered from its ``AppConfig.ready``:
the generic apps ask here instead of naming a kind.

- organiser links: a page of the kind's app that the task's dashboard links to (the response
  kind's vBLEU page), per kind;
- page sections: a block an app adds to a generic page (the account page, a task's overview, the
  organiser's dashboard), rendered from its own template with its own context (``notices``: the
  e-mail choices, the announcements, the messages to the participants);
- large files: a view declares that its POST may carry files beyond the run upload's limit (a
  vBLEU pool), which the request-body middleware reads (``evalserver.middleware``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.safestring import SafeString


@dataclass(frozen=True)
class OrganiserLink:
    label: str
    url_name: str  # a URL pattern that takes the task's slug


_ORGANISER_LINKS: dict[str, list[OrganiserLink]] = {}


def add_organiser_link(kind: str, label: str, url_name: str) -> None:
    """Link the dashboards of ``kind``'s tasks to a page of the kind's app (once per URL name)."""
    links = _ORGANISER_LINKS.setdefault(kind, [])
    if all(link.url_name != url_name for link in links):
        links.append(OrganiserLink(label, url_name))


def organiser_links(task: Any) -> list[dict[str, str]]:
    """The dashboard's links to the pages the task's kind adds, as {"label", "url"}."""
    return [{"label": link.label, "url": reverse(link.url_name, args=[task.slug])}
            for link in _ORGANISER_LINKS.get(task.kind, [])]


# The generic pages that take sections, and what each passes to a section's context function.
PAGES = {"account": (), "task-overview": ("task",), "organiser-dashboard": ("task",)}


@dataclass(frozen=True)
class PageSection:
    template: str
    # (request, **the page's values) -> the template's context, or None when there is nothing to show.
    context: Callable[..., dict[str, Any] | None]


_SECTIONS: dict[str, list[PageSection]] = {}


def add_page_section(page: str, template: str, context: Callable[..., dict[str, Any] | None]) -> None:
    """Add a section to one of the generic ``PAGES`` (once per template)."""
    if page not in PAGES:
        raise ValueError(f"no page {page!r} takes sections (known: {', '.join(PAGES)})")
    sections = _SECTIONS.setdefault(page, [])
    if all(section.template != template for section in sections):
        sections.append(PageSection(template, context))


def page_sections(page: str, request: HttpRequest, **values: Any) -> list[SafeString]:
    """The sections the apps add to ``page``, rendered for this request, in the order added."""
    rendered = []
    for section in _SECTIONS.get(page, []):
        context = section.context(request, **values)
        if context is not None:
            rendered.append(render_to_string(section.template, context, request))
    return rendered


def accepts_large_files(files: int) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Declare on a view that its POST may carry ``files`` files of up to EVALSERVER_POOL_MAX_BYTES
    each (``EVALSERVER_POOL_MAX_BYTES``, above the run upload's limit); an admin declares it for its add page
    with a ``large_files`` attribute. The body limit lives with the view, not in a list in the middleware."""

    def declare(view: Callable[..., Any]) -> Callable[..., Any]:
        view.large_files = files  # type: ignore[attr-defined]
        return view

    return declare


def large_files_of(match: Any) -> int:
    """How many large files the resolved view takes (0: the default body limit applies)."""
    files = getattr(match.func, "large_files", 0)
    model_admin = getattr(match.func, "model_admin", None)  # Django's admin marks its views so
    if not files and model_admin is not None and (match.url_name or "").endswith("_add"):
        files = getattr(model_admin, "large_files", 0)
    return int(files)
