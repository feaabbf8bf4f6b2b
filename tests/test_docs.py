"""The documentation's links: every relative link in README.md and docs/*.md names a file of the
repository, and every ``#anchor`` a heading of the file it points to (GitHub's rule for heading ids)."""
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
# [text](target), images too, outside fenced code blocks. Targets with a scheme (http:, mailto:) are skipped.
LINK = re.compile(r"\]\(([^()\s]*)\)")
HEADING = re.compile(r"^#{1,6} +(.+?) *#*$", re.M)
FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def heading_id(heading: str) -> str:
    """GitHub's id of a Markdown heading: lower case, every character but letters, digits, spaces,
    hyphens and underscores dropped, spaces made hyphens (runs of hyphens are kept)."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def heading_ids(path: Path) -> set:
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    ids, seen = set(), {}
    for match in HEADING.finditer(text):
        base = heading_id(match.group(1))
        count = seen.get(base, 0)
        ids.add(base if count == 0 else f"{base}-{count}")  # repeated headings get -1, -2, ...
        seen[base] = count + 1
    return ids


def links(path: Path):
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    for match in LINK.finditer(text):
        target = match.group(1)
        if target and not re.match(r"[a-z][a-z0-9+.-]*:", target):
            yield target


def test_heading_id_follows_githubs_rule():
    assert heading_id("Set-up") == "set-up"
    assert heading_id("GAT's tricks: the loss (2026-11-25/26)") == "gats-tricks-the-loss-2026-11-2526"
    assert heading_id("Cosine schedule (`--lr-schedule cosine`, one seed)") == "cosine-schedule---lr-schedule-cosine-one-seed"


def test_repeated_headings_get_numbered_ids(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Results\n\n## Seeds\n\n```\n## not a heading\n```\n\n## Seeds\n")
    assert heading_ids(page) == {"results", "seeds", "seeds-1"}


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(REPO).as_posix())
def test_relative_links_and_anchors_resolve(doc):
    broken = []
    for target in links(doc):
        file_part, _, anchor = target.partition("#")
        path = (doc.parent / file_part).resolve() if file_part else doc
        if not path.exists():
            broken.append(f"{target}: no file {path.relative_to(REPO) if REPO in path.parents else path}")
        elif anchor and path.suffix == ".md" and anchor not in heading_ids(path):
            broken.append(f"{target}: no heading with id {anchor!r} in {path.name}")
    assert not broken, f"{doc.name}: " + "; ".join(broken)
