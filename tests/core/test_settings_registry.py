"""Each setting has one home: its file in core/settings/, behind the one registry that every face reads. A setting's
name written as a literal anywhere else in the product's code (Python or the sidebar's TypeScript) is a second copy
that can drift; the transaction (control.py) and the TensorFlow adapter (runtime.py) never branch on a name; the
apply order is written once, in the registry; and no file of the package grows past 600 lines."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest
from harness import ROOT

from tfgpu_magic.core import saved, settings

PACKAGE = ROOT / "tfgpu_magic"
SIDEBAR = ROOT / "labextension" / "src"
REGISTRY_FILE = Path(settings.__file__)
MAX_LINES = 600
# The browser's word for a shown page (document.visibilityState) and the page request's key on the kernel channel,
# which carries it: the same letters as the `visible` setting, not that setting. Allowed in these files only.
PAGE_VISIBILITY = {("visible", PACKAGE / "ipython" / "comm.py"), ("visible", SIDEBAR / "comm.ts"),
                   ("visible", SIDEBAR / "feed.ts")}
# JupyterHub's REST API pages with ?offset=&limit=: the Hub's word, not the `limit` setting.
HUB_PAGING = {("limit", PACKAGE / "hub" / "discovery.py")}
NOT_THE_SETTING = PAGE_VISIBILITY | HUB_PAGING


def product_python() -> list[Path]:
    # The built sidebar (tfgpu_magic/labextension/) is no Python, and is not ours to read here.
    return sorted(p for p in PACKAGE.rglob("*.py") if "labextension" not in p.relative_to(PACKAGE).parts)


def home(setting: settings.Setting) -> Path:
    return Path(inspect.getfile(type(setting)))


def python_literals(path: Path, names: set[str]) -> list[tuple[int, str]]:
    """Every string constant (f-strings' literal parts included) that is exactly a setting's name."""
    return [(node.lineno, node.value) for node in ast.walk(ast.parse(path.read_text(), str(path)))
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names]


def typescript_literals(path: Path, names: set[str]) -> list[tuple[int, str]]:
    found = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        code = line.split("//", 1)[0]
        found += [(number, m.group(2)) for m in re.finditer(r"""(['"`])([a-z]+)\1""", code) if m.group(2) in names]
    return found


def test_a_settings_name_is_a_literal_only_in_its_own_file_and_the_registry():
    names = set(settings.names())
    assert names >= {"visible", "growth", "limit", "virtual", "cpus", "cpumem"}
    homes = {s.name: home(s) for s in settings.settings()}
    stray = [f"{path.relative_to(ROOT)}:{line}: {name!r}" for path in product_python()
             for line, name in python_literals(path, names)
             if path not in (homes[name], REGISTRY_FILE) and (name, path) not in NOT_THE_SETTING]
    stray += [f"{path.relative_to(ROOT)}:{line}: {name!r}" for path in sorted(SIDEBAR.rglob("*.ts"))
              for line, name in typescript_literals(path, names) if (name, path) not in NOT_THE_SETTING]
    assert not stray, "a setting's name outside its own file (core/settings/) and the registry:\n" + "\n".join(stray)


def test_the_check_sees_a_stray_name(tmp_path):
    """The scanners find what they are for: a name as a constant, in an f-string, in a TypeScript comparison."""
    sample = tmp_path / "stray.py"
    sample.write_text('if change.setting == "cpumem":\n    note = f"{x}"\nwords = ("limit", f"virtual{y}")\n')
    assert python_literals(sample, {"cpumem", "limit", "virtual"}) == [(1, "cpumem"), (3, "limit"), (3, "virtual")]
    script = tmp_path / "stray.ts"
    script.write_text("const perGpu = name === 'limit' || name === `virtual`; // 'growth' in a comment\n")
    assert typescript_literals(script, {"limit", "virtual", "growth"}) == [(1, "limit"), (1, "virtual")]


def test_cpumem_lives_in_at_most_three_product_files():
    holding = [p for p in [*product_python(), *SIDEBAR.rglob("*.ts")] if "cpumem" in p.read_text()]
    assert len(holding) <= 3, [str(p.relative_to(ROOT)) for p in holding]


@pytest.mark.parametrize("module", ["control.py", "runtime.py"])
def test_the_transaction_and_the_adapter_never_name_a_setting(module):
    text = (PACKAGE / "core" / module).read_text()
    code = ast.parse(text)
    named = sorted({n.value for n in ast.walk(code) if isinstance(n, ast.Constant) and isinstance(n.value, str)
                    for name in settings.names() if re.search(rf"\b{name}\b", n.value) and not _prose(n.value)})
    assert not named, f"{module} names a setting in code: {named}"


def _prose(text: str) -> bool:
    # A docstring or a sentence of a message may mention a setting by name; a comparison or a key is one word.
    return " " in text.strip()


def test_the_apply_order_is_the_registrys_everywhere():
    order = settings.names()
    assert saved.order()[: len(order)] == order
    assert [w["name"] for w in settings.wire_words()][: len(order)] == list(order)


def test_no_file_of_the_package_is_over_600_lines():
    long = {str(p.relative_to(ROOT)): n for p in product_python() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, long
