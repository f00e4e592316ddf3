#!/usr/bin/env bash
# Build the book (docs/) and check it: installs mdBook pinned into .cache/mdbook (once; later
# runs reuse it), checks that the measurement tables generated from benches/results are fresh,
# builds the book into docs/book/ (ignored by git), copies the charts it shows into it, and
# checks every relative link and #anchor of the built pages. Exits non-zero on a stale table,
# a build error or a broken link.
set -euo pipefail
REPO_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO_DIR"

MDBOOK_VERSION=0.4.52
root="$REPO_DIR/.cache/mdbook"
mdbook="$root/bin/mdbook"

if [[ ! -x "$mdbook" ]] || [[ "$("$mdbook" --version)" != "mdbook v$MDBOOK_VERSION" ]]; then
    echo "book: installing mdBook $MDBOOK_VERSION into .cache/mdbook (once)"
    t0=$SECONDS
    # Only the search feature: the book is built, never served from here (no tokio, axum or
    # file watcher to compile).
    cargo install --locked --quiet mdbook --version "$MDBOOK_VERSION" \
        --no-default-features --features search --root "$root"
    echo "book: mdBook installed in $((SECONDS - t0)) s"
fi

python3 docs/gen_tables.py --check

rm -rf docs/book
"$mdbook" build docs
python3 docs/charts.py docs/book
# The README links into the book's sources, as GitHub shows them: checked too.
python3 docs/check_links.py docs/book README.md
