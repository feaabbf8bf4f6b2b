"""The documentation's links and commands: every relative link in README.md and docs/*.md names a
file of the repository, and every ``#anchor`` a heading of the file it points to (GitHub's rule for
heading ids); every ``ttgnn`` and ``benchmarks/train_arxiv.py`` command in their code blocks is one
today's command lines accept (options, values, configuration names), so a reader can run it."""
import contextlib
import importlib.util
import io
import re
import shlex
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


# Commands in code blocks: lines joined at trailing backslashes, a "$ " prompt dropped, a comment
# (" #" on) cut; placeholders that stand for a value take one the parser accepts.
PLACEHOLDERS = {"S": "0"}


def commands(path: Path):
    """``(line, argv)`` of each ``ttgnn`` (also ``python -m ttgnn``, ``torchrun ... -m ttgnn``) and
    ``benchmarks/train_arxiv.py`` command in the code blocks of ``path``; ``argv[0]`` names the program
    (``ttgnn`` or ``train_arxiv``). Commands with ``...`` (an elided part) or ``--help`` are left out."""
    for block in re.findall(r"^```[^\n]*\n(.*?)^```", path.read_text(encoding="utf-8"), re.M | re.S):
        for line in re.sub(r"\\\n\s*", " ", block).splitlines():
            line = line.split(" #")[0].strip().removeprefix("$ ")
            if not line or line.startswith("#"):
                continue
            try:
                tokens = shlex.split(line)
            except ValueError:  # not shell (e.g. Python in a code block)
                continue
            if tokens[0] == "ttgnn":
                argv = tokens
            elif "ttgnn" in tokens and tokens[tokens.index("ttgnn") - 1] == "-m":
                argv = tokens[tokens.index("ttgnn"):]
            elif "benchmarks/train_arxiv.py" in tokens:
                argv = ["train_arxiv", *tokens[tokens.index("benchmarks/train_arxiv.py") + 1:]]
            else:
                continue
            if "..." in argv or "--help" in argv:
                continue
            yield line, [PLACEHOLDERS.get(t, t) for t in argv]


def _train_arxiv():
    spec = importlib.util.spec_from_file_location("train_arxiv", REPO / "benchmarks" / "train_arxiv.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def refusal(argv: list, train_arxiv) -> str:
    """Why today's command line refuses ``argv`` (its one-line error), or "" when it accepts it."""
    from ttgnn import cli

    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            if argv[0] == "train_arxiv":
                train_arxiv.parse_arguments(argv[1:])
                return ""
            args = cli.build_parser().parse_args(argv[1:])
        if args.command == "train":
            cli.config_from_args(args).validate()
    except SystemExit:
        return stderr.getvalue().strip().splitlines()[-1]
    except ValueError as err:
        return str(err)
    return ""


def test_commands_are_found_with_their_arguments(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("text ttgnn train --no\n\n```bash\n$ ttgnn info --rows 10 --dim 4   # a comment\n"
                    "python benchmarks/train_arxiv.py --only sage-tt \\\n    sage-full\n"
                    "torchrun --nproc-per-node=2 -m ttgnn train --seed S\nttgnn train ... --resume\n"
                    "ttgnn train --help\n# ttgnn train --seed 1\nprint('ttgnn')\n```\n")
    assert [argv for _, argv in commands(page)] == [
        ["ttgnn", "info", "--rows", "10", "--dim", "4"],
        ["train_arxiv", "--only", "sage-tt", "sage-full"],
        ["ttgnn", "train", "--seed", "0"]]


def test_a_stale_command_is_refused_with_the_parsers_reason(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))  # train_arxiv.py imports its sibling summary.py
    arxiv = _train_arxiv()
    assert refusal(["ttgnn", "train", "--dataset", "x", "--rank", "8"], arxiv) == ""
    assert "unrecognized arguments: --no-such-flag" in refusal(["ttgnn", "train", "--no-such-flag"], arxiv)
    assert "epochs" in refusal(["ttgnn", "train", "--epochs", "0"], arxiv)
    assert "invalid choice: 'no-such-config'" in refusal(["train_arxiv", "--only", "no-such-config"], arxiv)
    assert "--first-seed" in refusal(["train_arxiv", "--seeds", "2", "--first-seed", "2"], arxiv)


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(REPO).as_posix())
def test_commands_in_code_blocks_are_accepted(doc, monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    arxiv = _train_arxiv()
    refused = [f"{line}: {reason}" for line, argv in commands(doc) if (reason := refusal(argv, arxiv))]
    assert not refused, f"{doc.name}: " + "\n".join(refused)
