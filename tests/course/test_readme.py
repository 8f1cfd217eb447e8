"""The README stays a user's README: short, every link and image it and docs/ point at is there, and every command it
gives exists (a Makefile target or variable, a `tfgpu` option, the fix line the views print).

The detail lives in docs/*.md, whose links are relative to docs/. Cheap: files and `--help` only, no install."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from harness import ROOT

README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [README, *DOCS]
MAX_LINES = 300

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def _links(path):
    text = FENCE.sub("", path.read_text())  # a link-like text inside a code block is code, not a link
    return [target for target in LINK.findall(text) if not re.match(r"[a-z]+:", target)]


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(path):
    text = FENCE.sub("", path.read_text())
    return {_slug(m) for m in re.findall(r"^#{1,6} (.+)$", text, re.M)}


def _code(path):
    """The README's commands: its code blocks and inline code."""
    text = path.read_text()
    return "\n".join(FENCE.findall(text) + re.findall(r"`([^`\n]+)`", FENCE.sub("", text)))


def test_the_readme_is_short():
    lines = README.read_text().count("\n")
    assert lines <= MAX_LINES, f"README.md has {lines} lines: move detail into docs/ (at most {MAX_LINES})"


def test_the_readme_starts_with_the_two_commands():
    first = FENCE.search(README.read_text()).group(0)
    assert re.search(r"^make lab\b", first, re.M) and re.search(r"^make test\b", first, re.M), first


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_every_relative_link_and_image_resolves(page):
    broken = []
    for target in _links(page):
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no file {file}")
        elif anchor and file.suffix == ".md" and anchor not in _anchors(file):
            broken.append(f"{target}: no heading #{anchor} in {file.name}")
    assert not broken, "\n".join(broken)


def test_every_image_in_docs_is_shown_somewhere():
    shown = {(page.parent / t).resolve() for page in PAGES for t in _links(page) if t.endswith(".png")}
    unshown = [p.name for p in sorted((ROOT / "docs").glob("*.png")) if p.resolve() not in shown]
    assert not unshown, f"docs/ images no page shows: {unshown}"


def test_the_make_commands_it_gives_are_targets_and_variables_of_the_makefile():
    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z][\w-]*):", makefile, re.M))
    variables = set(re.findall(r"^([A-Z_]+) *\?=", makefile, re.M))
    for page in (README, ROOT / "docs" / "development.md"):
        for line in re.findall(r"\bmake( [^`\n#]*)", _code(page)):
            for word in line.split():
                if "=" in word:
                    name = word.split("=")[0]
                    assert name in variables, f"{page.name}: `make{line}`: the Makefile reads no {name}"
                elif re.fullmatch(r"[a-z][\w-]*", word):
                    assert word in targets, f"{page.name}: `make{line}`: the Makefile has no target {word}"
                else:
                    break  # past the make command: a quoted value, a comment's words


def test_the_tfgpu_options_it_gives_exist():
    help_text = subprocess.run([sys.executable, "-m", "tfgpu_magic", "--help"], capture_output=True, text=True,
                               timeout=60, check=True).stdout
    for line in re.findall(r"^tfgpu( .*?)(?:#|$)", _code(README), re.M):
        for word in line.split():
            assert word in help_text, f"README: `tfgpu{line}`: `tfgpu --help` knows no {word}"


def test_the_gpu_fix_is_the_one_the_views_print():
    """A CPU-only build is replaced, never installed over: the README says to remove tensorflow-cpu first, then
    install the line the views print."""
    from tfgpu_magic.core import no_gpu

    code = _code(README)
    remove, install = code.find("pip uninstall -y tensorflow-cpu"), code.find(no_gpu.FIX_BUILD)
    assert 0 <= remove < install, "README: `pip uninstall -y tensorflow-cpu` must come before " + no_gpu.FIX_BUILD
    assert "make lab GPU=1" in code


def test_every_lesson_is_in_the_readmes_table():
    text = README.read_text()
    missing = [p.name for p in sorted((ROOT / "notebooks").glob("*.ipynb")) if f"`{p.name}`" not in text]
    assert not missing, f"README's course table lacks {missing}"
