"""A page's text as its reader sees it: what the browser shows and the tooltips (``title``), without
scripts and styles, the targets of links, the fold-outs marked ``class="versions"`` (the software
versions and checksums kept for whoever opens them) and a data file's checksum (``class="checksum"``,
in the column that says it is one, to check a download against). A link's text that names the file it
downloads (``evalserver_cli.py``, ``format.json``) is the reader's word for that file, not a path
of ours, and is left out too."""

from __future__ import annotations

from html.parser import HTMLParser

SKIPPED = {"script", "style"}


class _Visible(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skip: list[str] = []  # the open elements whose text is left out
        self.link: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if self.skip:
            if tag == self.skip[-1]:
                self.skip.append(tag)
            return
        if tag in SKIPPED or {"versions", "checksum"} & set((attributes.get("class") or "").split()):
            self.skip.append(tag)
            return
        if attributes.get("title"):
            self.parts.append(attributes["title"] or "")
        if tag == "a":
            self.link = (attributes.get("href") or "").split("?")[0].rstrip("/").rsplit("/", 1)[-1]

    def handle_endtag(self, tag: str) -> None:
        if self.skip:
            if tag == self.skip[-1]:
                self.skip.pop()
            return
        if tag == "a":
            self.link = None

    def handle_data(self, data: str) -> None:
        if self.skip or (self.link and data.strip() == self.link):
            return
        self.parts.append(data)


def visible_text(page: str) -> str:
    parser = _Visible()
    parser.feed(page)
    parser.close()
    return " ".join(" ".join(parser.parts).split())
