"""Contracts written once: the five schema and protocol versions named alike on both sides, every Python path the
frontend sends to a kernel in labextension/src/constants.ts alone (tests/kernel/test_saved_kernel.py runs them), and
one version source (package.json) for the package, the wheel's metadata and the labextension."""

from __future__ import annotations

import json
import re
from importlib.metadata import version

from harness import ROOT

import tfgpu_magic
from tfgpu_magic.core import version as versions

SRC = ROOT / "labextension" / "src"
NAMES = ("SNAPSHOT_SCHEMA", "GPUS_SCHEMA", "COMM_PROTOCOL", "COMM_OPEN_VERSION", "SAVED_VERSION")


def test_the_five_versions_are_the_same_on_both_sides():
    constants = (SRC / "constants.ts").read_text()
    frontend = {name: int(value) for name, value in re.findall(r"^export const ([A-Z_]+) = (\d+);", constants, re.M)
                if name in NAMES}
    assert frontend == {name: getattr(versions, name) for name in NAMES}


def test_python_paths_live_in_constants_ts_alone():
    for path in SRC.rglob("*.ts"):
        if path.name != "constants.ts":
            assert "tfgpu_magic." not in path.read_text(), f"{path.relative_to(ROOT)} names a Python path"
    assert "PY_APPLY_MODULE = 'tfgpu_magic.ipython.apply'" in (SRC / "constants.ts").read_text()


def test_one_version_source():
    npm = json.loads((ROOT / "package.json").read_text())["version"]
    assert tfgpu_magic.__version__ == npm == version("tfgpu_magic")
    assert "version = " not in (ROOT / "pyproject.toml").read_text().split("[project.optional-dependencies]")[0]
    assert "__version__ = " not in (ROOT / "tfgpu_magic" / "__init__.py").read_text()
