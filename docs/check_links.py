#!/usr/bin/env python3
"""Checks every relative link and #anchor of a built book.

    python3 docs/check_links.py docs/book [FILE.md ...]

Reads every .html file under the book and every link in it (href and src attributes; a path
from the root, or under <base href="/">, is taken from the book's root, where mdBook's default
site-url puts it). A link
with a scheme (https:, mailto:, data:, ...) or to another host (//host/...) is not fetched, only
counted. Every other link must name a file inside the book (a directory stands for its
index.html), and its #fragment, if any, an id (or a name) in that page. A link that leaves the
book is broken: the built book has to stand on its own wherever it is served. Exits 1 listing
every broken link, 0 otherwise, and prints how many links it checked.

Each FILE.md named after the book (the README) is checked as GitHub shows it: every relative
link must name a file of the repository, and an #anchor into a Markdown file the slug GitHub
gives one of its headings. Python 3 standard library only.
"""

import collections
import pathlib
import re
import sys
from html.parser import HTMLParser
from urllib.parse import unquote, urlsplit

SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
LINK_ATTRS = {"href", "src"}


class Page(HTMLParser):
    """The ids a page defines and the links it holds."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids = set()
        self.links = []  # (line, tag, url)
        self.base = None  # <base href>, which the page's relative links are resolved against

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if value is None:
                continue
            if name == "id" or (tag == "a" and name == "name"):
                self.ids.add(value)
            elif tag == "base" and name == "href":
                self.base = value
            elif name in LINK_ATTRS:
                self.links.append((self.getpos()[0], tag, value))

    handle_startendtag = handle_starttag


def parse(path):
    page = Page()
    page.feed(path.read_text(encoding="utf-8"))
    page.close()
    return page


MD_LINK = re.compile(r"\]\(([^)\s]+)\)")
MD_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")


def github_slugs(path):
    """The anchors GitHub gives the headings of a Markdown file (outside code fences)."""
    slugs, seen, fenced = set(), collections.Counter(), False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        m = None if fenced else MD_HEADING.match(line)
        if not m:
            continue
        text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", m.group(1)).lower()
        slug = re.sub(r"[^\w\- ]", "", text).replace(" ", "-")
        slugs.add(slug if not seen[slug] else f"{slug}-{seen[slug]}")
        seen[slug] += 1
    return slugs


def check_markdown(md, broken, counts):
    """The relative links of one Markdown file, as GitHub resolves them."""
    fenced = False
    for number, line in enumerate(md.read_text(encoding="utf-8").splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
        if fenced:
            continue
        for url in MD_LINK.findall(line):
            if SCHEME.match(url) or url.startswith("//"):
                counts["external, not fetched"] += 1
                continue
            counts["relative"] += 1
            parts = urlsplit(url)
            target = (md.parent / unquote(parts.path)).resolve() if parts.path else md
            where = f"{md.name}:{number}"
            if not target.exists():
                broken.append(f"{where}: {url}: no such file")
            elif parts.fragment:
                counts["with an anchor"] += 1
                if target.suffix == ".md" and parts.fragment not in github_slugs(target):
                    broken.append(f"{where}: {url}: no heading '{parts.fragment}' in {target.name}")


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    book = pathlib.Path(argv[1]).resolve()
    if not (book / "index.html").is_file():
        sys.exit(f"check_links: {book} is not a built book (no index.html)")
    pages = {p: parse(p) for p in sorted(book.rglob("*.html"))}

    broken = []
    counts = collections.Counter()
    for path, page in pages.items():
        where = path.relative_to(book)
        for line, tag, url in page.links:
            url = url.strip()
            if SCHEME.match(url) or url.startswith("//"):
                counts["external, not fetched"] += 1
                continue
            parts = urlsplit(url)
            # A path from the root ("/x", or any path under <base href="/">, which mdBook gives
            # its 404 page) is one from the book's root: mdBook's site-url, "/" by default.
            base = path.parent
            if parts.path.startswith("/") or (page.base or "").startswith("/"):
                base = book / (page.base or "/").lstrip("/")
            target = path if not parts.path else (base / unquote(parts.path.lstrip("/"))).resolve()
            counts["relative"] += 1
            try:
                target.relative_to(book)
            except ValueError:
                broken.append(f"{where}:{line}: <{tag}> {url}: leaves the book")
                continue
            if target.is_dir():
                target = target / "index.html"
            if not target.is_file():
                broken.append(f"{where}:{line}: <{tag}> {url}: no such file")
                continue
            if parts.fragment:
                counts["with an anchor"] += 1
                fragment = unquote(parts.fragment)
                if target.suffix != ".html":
                    broken.append(f"{where}:{line}: <{tag}> {url}: an anchor into a non-page")
                elif target not in pages:
                    broken.append(f"{where}:{line}: <{tag}> {url}: not a page of the book")
                elif fragment not in pages[target].ids:
                    broken.append(f"{where}:{line}: <{tag}> {url}: no id '{fragment}' in "
                                  f"{target.relative_to(book)}")

    for md in argv[2:]:
        check_markdown(pathlib.Path(md).resolve(), broken, counts)

    for b in broken:
        print(f"check_links: broken: {b}", file=sys.stderr)
    checked = counts["relative"]
    also = f" and {len(argv) - 2} Markdown files" if len(argv) > 2 else ""
    print(f"check_links: {checked} relative links checked in {len(pages)} pages{also} "
          f"({counts['with an anchor']} with an #anchor), {len(broken)} broken; "
          f"{counts['external, not fetched']} external links not fetched")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
