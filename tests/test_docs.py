"""The documentation's links and commands: every relative link in README.md and docs/*.md names a
file of the repository, and every ``#anchor`` a heading of the file it points to (GitHub's rule for
heading ids); every ``ttgnn`` and ``benchmarks/train_arxiv.py`` command in their code blocks is one
today's command lines accept (options, values, configuration names), so a reader can run it."""
import argparse
import contextlib
import io
import re
import shlex
import sys
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
# (" #" on) cut; placeholders that stand for a value take one the parser accepts: S (a seed) 0,
# <a|b> (one of several) a.
PLACEHOLDERS = {"S": "0"}
CHOICE = re.compile(r"<([^|<>]+)\|[^<>]*>")
SCRIPT = re.compile(r"(benchmarks|examples)/\w+\.py")


def commands(path: Path):
    """``(line, argv)`` of each ``ttgnn`` command (also ``python -m ttgnn``, ``torchrun ... -m ttgnn``)
    and each run of a Python script of ``benchmarks/`` or ``examples/`` in the code blocks (fenced or
    indented) of ``path``; ``argv[0]`` is ``ttgnn`` or the script's path. Commands with ``...`` (an
    elided part) or ``--help`` are left out."""
    text = path.read_text(encoding="utf-8")
    fenced = re.findall(r"^```[^\n]*\n(.*?)^```", text, re.M | re.S)
    indented = re.findall(r"^\n((?: {4}.*\n)+)", FENCE.sub("", text), re.M)  # four-space code blocks
    for block in fenced + indented:
        for line in re.sub(r"\\\n\s*", " ", block).splitlines():
            line = line.split(" #")[0].strip().removeprefix("$ ")
            if not line or line.startswith("#"):
                continue
            try:
                tokens = shlex.split(line)
            except ValueError:  # not shell (e.g. Python in a code block)
                continue
            scripts = [i for i, t in enumerate(tokens) if SCRIPT.fullmatch(t)]
            if tokens[0] == "ttgnn":
                argv = tokens
            elif "ttgnn" in tokens and tokens[tokens.index("ttgnn") - 1] == "-m":
                argv = tokens[tokens.index("ttgnn"):]
            elif scripts:
                argv = tokens[scripts[0]:]
            else:
                continue
            if "..." in argv or "--help" in argv:
                continue
            yield line, [CHOICE.sub(r"\1", PLACEHOLDERS.get(t, t)) for t in argv]


class _Parsed(Exception):
    """Raised in place of running a script once its command line has parsed."""


def refusal(argv: list, monkeypatch, load_script) -> str:
    """Why today's command line refuses ``argv`` (its one-line error), or "" when it accepts it. A
    script's ``main()`` runs until its parser has parsed, no further (``train_arxiv.py``: its own
    checks after parsing too); ``ttgnn train``: the settings' :meth:`TrainConfig.validate` too."""
    from ttgnn import cli

    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr), monkeypatch.context() as patch:
            if argv[0] == "ttgnn":
                args = cli.build_parser().parse_args(argv[1:])
                if args.command == "train":
                    cli.config_from_args(args).validate()
                return ""
            module = load_script(argv[0])
            if hasattr(module, "parse_arguments"):
                module.parse_arguments(argv[1:])
                return ""
            original = argparse.ArgumentParser.parse_args

            def parse_then_stop(parser, args=None, namespace=None):
                original(parser, args, namespace)
                raise _Parsed

            patch.setattr(argparse.ArgumentParser, "parse_args", parse_then_stop)
            patch.setattr(sys, "argv", argv)
            try:
                module.main()
            except _Parsed:
                return ""
            return f"{argv[0]}: main() returned without parsing a command line"
    except SystemExit:
        return (stderr.getvalue().strip().splitlines() or ["exit without a message"])[-1]
    except ValueError as err:
        return str(err)


def test_commands_are_found_with_their_arguments(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("text ttgnn train --no\n\n```bash\n$ ttgnn info --rows 10 --dim 4   # a comment\n"
                    "python benchmarks/train_arxiv.py --only sage-tt \\\n    sage-full\n"
                    "torchrun --nproc-per-node=2 -m ttgnn train --seed S\nttgnn train ... --resume\n"
                    "OMP_NUM_THREADS=1 python examples/train_arxiv.py --epochs 2 --rank <8|16>\n"
                    "ttgnn train --help\n# ttgnn train --seed 1\nprint('ttgnn')\n```\n\nindented:\n\n"
                    "    ttgnn plan --dataset x \\\n        --mode full\n")
    assert [argv for _, argv in commands(page)] == [
        ["ttgnn", "info", "--rows", "10", "--dim", "4"],
        ["benchmarks/train_arxiv.py", "--only", "sage-tt", "sage-full"],
        ["ttgnn", "train", "--seed", "0"],
        ["examples/train_arxiv.py", "--epochs", "2", "--rank", "8"],
        ["ttgnn", "plan", "--dataset", "x", "--mode", "full"]]


def test_a_stale_command_is_refused_with_the_parsers_reason(monkeypatch, load_script):
    def reason(argv):
        return refusal(argv, monkeypatch, load_script)

    assert reason(["ttgnn", "train", "--dataset", "x", "--rank", "8"]) == ""
    assert "unrecognized arguments: --no-such-flag" in reason(["ttgnn", "train", "--no-such-flag"])
    assert "epochs" in reason(["ttgnn", "train", "--epochs", "0"])
    arxiv = "benchmarks/train_arxiv.py"
    assert reason([arxiv, "--only", "now-gat-tt"]) == ""
    assert "invalid choice: 'no-such-config'" in reason([arxiv, "--only", "no-such-config"])
    assert "--first-seed" in reason([arxiv, "--seeds", "2", "--first-seed", "2"])
    # any other script: parsed by its own parser, then stopped before it does anything
    assert reason(["benchmarks/bench_lookup.py", "--shapes", "arxiv"]) == ""
    assert "unrecognized arguments: --no-such-flag" in reason(["benchmarks/bench_lookup.py", "--no-such-flag"])
    assert argparse.ArgumentParser.parse_args.__name__ == "parse_args"  # the stop is undone


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(REPO).as_posix())
def test_commands_in_code_blocks_are_accepted(doc, monkeypatch, load_script):
    refused = [f"{line}: {reason}" for line, argv in commands(doc)
               if (reason := refusal(argv, monkeypatch, load_script))]
    assert not refused, f"{doc.name}: " + "\n".join(refused)
