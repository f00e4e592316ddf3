#!/usr/bin/env python3
"""Brings the charts a built book shows into the book.

    python3 docs/charts.py docs/book

The book's pages link each chart where it lives, `../../../benches/results/NAME.svg` from
docs/src/<part>/<page>.md, so that the Markdown shows it on GitHub and in any editor. mdBook
copies only what is under docs/src, and such a link leaves the built book. This copies every
chart a built page links from benches/results into BOOK/charts/ and points the page's link at
the copy, so the built book holds every file it shows and no chart is committed twice.
Python 3 standard library only.
"""

import os
import pathlib
import re
import shutil
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
CHARTS = ROOT / "benches" / "results"
# src="..." or href="..." whose value ends in benches/results/NAME.svg.
LINK = re.compile(r'((?:src|href)=")([^"#?]*benches/results/([A-Za-z0-9._-]+\.svg))(")')


def main(argv):
    if len(argv) != 2:
        sys.exit(__doc__)
    book = pathlib.Path(argv[1]).resolve()
    out = book / "charts"
    copied, rewritten = set(), 0
    for page in sorted(book.rglob("*.html")):
        text = page.read_text(encoding="utf-8")

        def repoint(m):
            nonlocal rewritten
            target = (page.parent / m.group(2)).resolve()
            if target.parent != CHARTS or not target.is_file():
                return m.group(0)  # not one of the charts; the link checker judges it
            out.mkdir(exist_ok=True)
            if target.name not in copied:
                shutil.copyfile(target, out / target.name)
                copied.add(target.name)
            rewritten += 1
            rel = os.path.relpath(out / target.name, page.parent)
            return m.group(1) + pathlib.PurePath(rel).as_posix() + m.group(4)

        new = LINK.sub(repoint, text)
        if new != text:
            page.write_text(new, encoding="utf-8")
    print(f"charts: {len(copied)} charts copied into {out.relative_to(ROOT)}, "
          f"{rewritten} links pointed at them")


if __name__ == "__main__":
    main(sys.argv)
