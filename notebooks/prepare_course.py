"""Set up the learner's working copy of the course: `make lab` runs this, then starts JupyterLab there.

    python notebooks/prepare_course.py [DEST]       # DEST defaults to course/ at the repository root

Copies every notebook of notebooks/ into DEST (git-ignored), but only where DEST has no copy of it yet,
so a learner's work survives the next `make lab`; delete a file in DEST to get a fresh copy of that
lesson. The tracked notebooks are never opened for writing: running the course saves its outputs into
DEST, and notebooks/ stays as committed (without outputs). Standard library only."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

NOTEBOOKS = Path(__file__).resolve().parent
DEFAULT_DEST = NOTEBOOKS.parent / "course"


def prepare(dest: Path | str = DEFAULT_DEST) -> tuple[list[str], list[str]]:
    """Copy the course into ``dest``; return the names copied and the names kept (already there)."""
    dest = Path(dest)
    if dest.resolve() == NOTEBOOKS:
        raise SystemExit("prepare_course: the working copy must not be notebooks/ itself")
    dest.mkdir(parents=True, exist_ok=True)
    copied, kept = [], []
    for source in sorted(NOTEBOOKS.glob("*.ipynb")):
        target = dest / source.name
        if target.exists():
            kept.append(source.name)
        else:
            shutil.copyfile(source, target)
            copied.append(source.name)
    return copied, kept


def main(argv: list[str]) -> int:
    if len(argv) > 1:
        print("usage: python notebooks/prepare_course.py [DEST]", file=sys.stderr)
        return 2
    dest = Path(argv[0]) if argv else DEFAULT_DEST
    copied, kept = prepare(dest)
    print(f"course: the working copy is {dest}/; the tracked notebooks/ are never written")
    if copied:
        print(f"  copied: {', '.join(copied)}")
    if kept:
        print(f"  kept your copy of: {', '.join(kept)} (delete a file there to start that lesson afresh)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
