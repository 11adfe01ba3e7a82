"""README.md and docs/ are kept true: every link resolves (the file, and the heading an anchor names), every
`relreason` command they show exists and takes the options they show it with, and README stays an
introduction (a line budget), with the reference in docs/, one page per subject, each linked from README."""

from __future__ import annotations

import re
import shlex
from functools import lru_cache
from pathlib import Path

import pytest
from typer.testing import CliRunner

from relreason.cli.main import app

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [README, *DOCS]
README_BUDGET = 200  # lines: an introduction, not a manual (issue 41)

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to '-'."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text())
    return {_slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, re.M)}


def _links(page: Path) -> list[str]:
    return [m.group(1) for m in LINK.finditer(FENCE.sub("", page.read_text()))]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_link_resolves(page):
    broken = []
    for target in _links(page):
        if re.match(r"^[a-z]+:", target):  # https:, mailto:: outside the checkout
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in _anchors(file):
            broken.append(f"{target}: no heading with that anchor")
    assert not broken, f"{page.name}: " + "; ".join(broken)


def test_readme_is_an_introduction():
    lines = README.read_text().splitlines()
    assert len(lines) <= README_BUDGET, f"README.md has {len(lines)} lines; its budget is {README_BUDGET}"
    headings = [line for line in lines if line.startswith("## ")]
    assert "## Layout" in headings
    linked = {(README.parent / target.partition("#")[0]).resolve() for target in _links(README)}
    assert not [p.name for p in DOCS if p.resolve() not in linked], "every docs/ page is linked from README"


def _commands() -> list[tuple[str, int, list[str]]]:
    """(page, line, argv) of every `relreason ...` command in the shell blocks of README and docs/."""
    out = []
    for page in PAGES:
        text = page.read_text()
        for block in FENCE.finditer(text):
            if block.group(1) not in ("bash", "sh", "shell", ""):
                continue
            first = text[: block.start(2)].count("\n") + 1
            for i, line in enumerate(block.group(2).replace("\\\n", " ").splitlines()):
                for part in re.split(r"&&|\|", line.split(" #")[0]):
                    words = shlex.split(part, comments=True) if part.strip() else []
                    while words and ("=" in words[0] and not words[0].startswith("-")):  # VAR=x relreason ...
                        words = words[1:]
                    if words and Path(words[0]).name == "relreason" and len(words) > 1:
                        out.append((page.relative_to(ROOT).as_posix(), first + i, words[1:]))
    return out


COMMANDS = _commands()


@lru_cache(maxsize=None)
def _help(command: tuple[str, ...]) -> str:
    res = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "400"})
    assert res.exit_code == 0, f"relreason {' '.join(command)} --help: exit {res.exit_code}\n{res.output}"
    return res.output


def _command_path(argv: list[str]) -> tuple[str, ...]:
    """The (sub)command an argv names: `runs`, or `list algorithms|models`-style choices stay arguments."""
    return (argv[0],)


def test_the_docs_show_commands():
    assert len(COMMANDS) > 50, "README and docs/ show the commands in ```bash blocks"


@pytest.mark.parametrize("command", sorted({_command_path(argv) for _, _, argv in COMMANDS}), ids=" ".join)
def test_every_shown_command_exists(command):
    _help(command)


def test_every_shown_option_exists():
    """Each `--option` a page shows a command with is one of that command's options."""
    missing = []
    for page, line, argv in COMMANDS:
        if argv[0].startswith("-"):  # `relreason --version`
            continue
        options = set(re.findall(r"(?<![\w-])(--[a-z][\w-]*|-[a-zA-Z])\b", _help(_command_path(argv))))
        for word in argv[1:]:
            option = word.split("=", 1)[0]
            if option.startswith("-") and option not in options and not re.fullmatch(r"-\d.*", option):
                missing.append(f"{page}:{line}: relreason {argv[0]} {option}")
    assert not missing, "options the docs show that the command does not take:\n" + "\n".join(missing)
