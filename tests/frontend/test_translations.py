"""Every word of the sidebar reaches the page through the translator, and the zh_CN catalogue has all of them.

The sidebar's source is read with the TypeScript compiler (scripts/ts_strings.mjs, Node.js: hence this folder),
the catalogue with scripts/catalogue.py, the tool that writes it. Each check is shown to fail on a planted mistake
in a temporary copy of the tree, so a check that cannot fail is caught too.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from harness import ROOT

_spec = importlib.util.spec_from_file_location("catalogue", ROOT / "scripts" / "catalogue.py")
catalogue = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(catalogue)

LC = Path("tfgpu_magic/locale/zh_CN/LC_MESSAGES")
COMPILED = [Path("tfgpu_magic/locale/tfgpu_magic.pot"), LC / "tfgpu_magic.po", LC / "tfgpu_magic.json",
            LC / "tfgpu_magic.mo"]

# trans.__ calls whose message is not a literal, each with why it is still extracted. The key is (file, argument's
# code), not a line number, so an edit above them does not break this list.
DATA_WORDS = {
    # words the kernel and the server send with their data (tfgpu_magic/core/words.py, marked there with N_()
    # and so extracted from Python): the sidebar translates what it is sent
    ("labextension/src/model/format.ts", "known"),
    ("labextension/src/model/format.ts", "words?.missing || 'n/a'"),
    ("labextension/src/model/format.ts", "words.noName"),
    ("labextension/src/model/notebook.ts", "known"),
    ("labextension/src/model/notebook.ts", "known.words"),
}


def scan(root: Path) -> dict:
    return catalogue.ts_scan(root)


def non_literal(root: Path) -> list[dict]:
    return [c for c in scan(root)["nonLiteral"] if (c["file"], c["code"]) not in DATA_WORDS]


def tree_copy(tmp_path: Path) -> Path:
    """What the catalogue is made from and of: the sidebar's source and schema, the Python package (no build output)."""
    root = tmp_path / "tree"
    for folder in ("labextension/src", "labextension/schema"):
        shutil.copytree(ROOT / folder, root / folder)
    shutil.copytree(ROOT / "tfgpu_magic", root / "tfgpu_magic",
                    ignore=shutil.ignore_patterns("__pycache__", "labextension", "*.pyc"))
    return root


def plant(root: Path, code: str) -> None:
    (root / "labextension" / "src" / "planted.ts").write_text(code, encoding="utf-8")


def run(root: Path, *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, str(ROOT / "scripts" / "catalogue.py"), "--root", str(root), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


# (a) gettext extracts literals only: a message built at run time is never in the catalogue

def test_every_translator_calls_message_is_a_string_literal():
    assert non_literal(ROOT) == []


def test_a_variable_a_template_or_a_concatenation_in_trans_is_found(tmp_path):
    root = tree_copy(tmp_path)
    plant(root, "const a = trans.__(name);\nconst b = trans.__(`GPU ${i}`);\nconst c = trans.__('a' + 'b');\n"
                "const d = this._trans._n('one GPU', plural, n);\nconst e = trans.__('fine %1', name);\n")
    found = {(c["line"], c["code"]) for c in non_literal(root)}
    assert found == {(1, "name"), (2, "`GPU ${i}`"), (3, "'a' + 'b'"), (4, "plural")}


# (b) a literal that reaches the page without the translator stays English in every language

def test_no_words_reach_the_page_without_the_translator():
    assert scan(ROOT)["untranslated"] == []


def test_words_put_on_the_page_directly_are_found(tmp_path):
    root = tree_copy(tmp_path)
    plant(root, "\n".join([
        "node.textContent = 'Free memory';",
        "node.title = `GPU ${index} is busy`;",
        "button.setAttribute('aria-label', ok ? 'Shut down' : trans.__('Cancel'));",
        "el('span', 'tfgpu-label', 'Recent cells');",
        "showDialog({ title: 'Really?', body: 'Sure', buttons: [Dialog.okButton({ label: 'Yes' })] });",
        "Notification.error('Broken thing');",
        # not words: a magic, a class list, units and names stay as typed
        "el('code', 'tfgpu-magic', '%tfgpu limit 40%');",
        "node.title = 'tfgpu-bar jp-mod-minimal';",
        "node.textContent = '6.0 GiB · CUDA';",
    ]))
    found = {(u["line"], u["text"]) for u in scan(root)["untranslated"]}
    assert found == {(1, "Free memory"), (2, "GPU   is busy"), (3, "Shut down"), (4, "Recent cells"),
                     (5, "Really?"), (5, "Sure"), (5, "Yes"), (6, "Broken thing")}


# (c) every message has a translation with the placeholders of its English

def test_every_message_has_a_chinese_translation_with_its_placeholders():
    problems = catalogue.problems(ROOT)
    assert problems == [], "\n".join(problems)


def test_an_untranslated_message_or_a_lost_placeholder_fails_the_check(tmp_path):
    root = tree_copy(tmp_path)
    plant(root, "const a = trans.__('A planted message about %1', gpu);\n")
    out = run(root, "check")
    assert out.returncode == 1 and "not in the catalogue (run `update`): 'A planted message about %1'" in out.stdout
    assert run(root, "update").returncode == 0
    out = run(root, "check")
    assert out.returncode == 1 and "no zh_CN translation: 'A planted message about %1'" in out.stdout
    table = tmp_path / "zh.json"
    table.write_text(json.dumps({"A planted message about %1": "关于 GPU 的消息"}, ensure_ascii=False))
    assert run(root, "translate", str(table)).returncode == 0
    out = run(root, "check")
    assert out.returncode == 1 and "placeholders differ (['%1'] in the English, [] in zh_CN)" in out.stdout
    table.write_text(json.dumps({"A planted message about %1": "关于 %1 的消息"}, ensure_ascii=False))
    assert run(root, "translate", str(table)).returncode == 0
    out = run(root, "check")
    assert "A planted message" not in out.stdout


# (d) the committed catalogue is what the tool makes of the committed source

def test_the_committed_catalogue_is_a_fresh_update_and_compile(tmp_path):
    root = tree_copy(tmp_path)
    for step in ("update", "compile"):
        out = run(root, step)
        assert out.returncode == 0, out.stderr
    stale = [str(p) for p in COMPILED if (root / p).read_bytes() != (ROOT / p).read_bytes()]
    assert stale == [], (f"{stale} differ from a fresh `scripts/catalogue.py update` and `compile`: run them "
                         "(and translate) and commit the result")


def test_a_new_message_makes_the_committed_catalogue_stale(tmp_path):
    root = tree_copy(tmp_path)
    plant(root, "const a = trans.__('A planted message');\n")
    for step in ("update", "compile"):
        assert run(root, step).returncode == 0
    assert (root / COMPILED[0]).read_bytes() != (ROOT / COMPILED[0]).read_bytes()
    assert (root / COMPILED[1]).read_bytes() != (ROOT / COMPILED[1]).read_bytes()


@pytest.mark.parametrize("path", COMPILED[2:], ids=lambda p: p.suffix)
def test_the_compiled_catalogue_translates(path):
    """The .json is the one JupyterLab's server serves for the domain; the .mo reads with Python's gettext."""
    if path.suffix == ".json":
        data = json.loads((ROOT / path).read_text(encoding="utf-8"))
        assert data[""]["domain"] == "tfgpu_magic" and data[""]["language"] == "zh-CN"
        assert data["Shut down"] == ["关闭"]
        assert data["schema\x04GPUs sidebar"] == ["GPU 侧边栏"]
    else:
        import gettext

        with (ROOT / path).open("rb") as fh:
            translation = gettext.GNUTranslations(fh)
        assert translation.gettext("Shut down") == "关闭"
