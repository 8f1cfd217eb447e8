"""The sidebar's model code (labextension/src/model.ts: server JSON and comm messages into rows), tested by
its own node:test suite (labextension/test/*.test.mjs) on the compiled lib/, run here so the test command
runs it too."""

from __future__ import annotations

import re
import shutil
import subprocess

from harness import ROOT


def test_frontend_model_unit_tests_pass():
    node = shutil.which("node")
    assert node, "Node.js is needed to test the sidebar's model (make setup checks for 20.19+)"
    assert (ROOT / "lib" / "model" / "index.js").exists(), \
        "lib/model/index.js is missing: `make setup` (or jlpm build) compiles it"
    tests = sorted((ROOT / "labextension" / "test").glob("*.test.mjs"))
    assert tests, "no frontend tests found"
    proc = subprocess.run([node, "--test", *map(str, tests)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    report = proc.stdout + proc.stderr
    assert proc.returncode == 0, report[-6000:]
    passed = int(re.search(r"^# pass (\d+)$", report, re.M).group(1))
    failed = int(re.search(r"^# fail (\d+)$", report, re.M).group(1))
    assert failed == 0 and passed >= 10, report[-3000:]
