#!/usr/bin/env python3
"""The Chinese (zh_CN) catalogue of tfgpu_magic: one gettext domain, `tfgpu_magic`, for the sidebar and the Python side.

    python scripts/catalogue.py update            extract every message, write the .pot, merge it into the .po
    python scripts/catalogue.py translate F.json  put translations {msgid: msgstr} into the .po
    python scripts/catalogue.py compile           write the .json (JupyterLab's format) and the .mo (Python's gettext)
    python scripts/catalogue.py check             exit 1 listing messages without a translation, or whose
                                                  translation lacks or adds a placeholder (%1, {name}, %(n)s)

Messages come from labextension/src/**/*.ts (trans.__ / _n / _p / _np, read by scripts/ts_strings.mjs with the
TypeScript compiler), labextension/schema/*.json (the titles and descriptions JupyterLab's server translates, with
its own selectors and contexts) and tfgpu_magic/**/*.py (_(), ngettext(), N_(), read by babel).

The .po (tfgpu_magic/locale/zh_CN/LC_MESSAGES/tfgpu_magic.po) is the source of truth; the .json and .mo beside it
are compiled from it and committed, so the wheel carries them. Every output is deterministic (sorted, no dates),
so a test can compare the committed files with a fresh update + compile.

--root DIR works on another copy of the tree (the tests use a temporary one).

In translate's JSON, a key is a msgid (every context), or "context\\u0004msgid" for one context; a value is the
translation, for a plural message a string or a list whose first item is used (Chinese has one plural form).
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

DOMAIN = "tfgpu_magic"
LOCALES = ("zh_CN",)
HERE = Path(__file__).resolve().parent
TS_STRINGS = HERE / "ts_strings.mjs"
PLURAL_FORMS = {"zh_CN": "nplurals=1; plural=0;"}
# Python's calls that mark a message: name -> positions of (singular, plural)
PY_KEYWORDS = {"_": None, "gettext": None, "ngettext": (1, 2), "N_": None, "pgettext": ((1, "c"), 2),
               "npgettext": ((1, "c"), 2, 3)}
PLACEHOLDER = re.compile(r"%\d+|%\([A-Za-z_][A-Za-z0-9_]*\)[sdrif]|(?<![%\w])%[sdrif]|\{[A-Za-z_][A-Za-z0-9_]*\}")


def paths(root: Path) -> dict[str, Path]:
    locale = root / DOMAIN / "locale"
    return {"locale": locale, "pot": locale / f"{DOMAIN}.pot"}


def po_path(root: Path, locale: str) -> Path:
    return paths(root)["locale"] / locale / "LC_MESSAGES" / f"{DOMAIN}.po"


class Message:
    __slots__ = ("context", "msgid", "plural", "where")

    def __init__(self, context: str | None, msgid: str, plural: str | None):
        self.context, self.msgid, self.plural, self.where = context or None, msgid, plural, set()

    @property
    def key(self) -> tuple[str, str]:
        return (self.context or "", self.msgid)


def _add(found: dict, context, msgid, plural, where) -> None:
    if not msgid:
        return
    message = found.setdefault((context or "", msgid), Message(context, msgid, plural))
    if plural and not message.plural:
        message.plural = plural
    message.where.add(where)


def ts_scan(root: Path) -> dict:
    """scripts/ts_strings.mjs's answer for ROOT: messages, nonLiteral, untranslated."""
    node = shutil.which("node")
    if node is None:
        sys.exit("catalogue.py: reading the sidebar's source needs Node.js (and `jlpm install` for typescript)")
    out = subprocess.run([node, str(TS_STRINGS), str(root)], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def extract(root: Path) -> dict[tuple[str, str], Message]:
    found: dict[tuple[str, str], Message] = {}
    for m in ts_scan(root)["messages"]:
        _add(found, m.get("context"), m["msgid"], m.get("plural"), m["file"])

    # the schema, walked with the selectors and contexts JupyterLab's server translates it with
    from jupyterlab_server.translation_utils import _prepare_schema_patterns

    def walk(node, where, patterns, prefix=""):
        for key, value in node.items():
            at = f"{prefix}/{key}"
            if isinstance(value, str):
                for pattern, context in patterns.items():
                    if pattern.fullmatch(at):
                        _add(found, context, value, None, where)
                        break
            elif isinstance(value, dict):
                walk(value, where, patterns, at)
            elif isinstance(value, list):
                for i, item in enumerate(value):
                    if isinstance(item, dict):
                        walk(item, where, patterns, f"{at}[{i}]")

    for schema_file in sorted((root / "labextension" / "schema").glob("*.json")):
        schema = json.loads(schema_file.read_text(encoding="utf-8"))
        walk(schema, schema_file.relative_to(root).as_posix(), _prepare_schema_patterns(schema))

    from babel.messages.extract import extract as babel_extract

    package = root / DOMAIN
    for py in sorted(package.rglob("*.py")):
        rel = py.relative_to(root)
        if "labextension" in rel.parts:
            continue
        with py.open("rb") as fh:
            for _lineno, text, _comments, context in babel_extract("python", fh, keywords=PY_KEYWORDS):
                if isinstance(text, tuple):
                    _add(found, context, text[0], text[1] if len(text) > 1 else None, rel.as_posix())
                else:
                    _add(found, context, text, None, rel.as_posix())
    return found


def counts(found: dict[tuple[str, str], Message]) -> dict[str, int]:
    kinds = {"ts": 0, "schema": 0, "python": 0}
    for m in found.values():
        for kind, test in (("ts", ".ts"), ("schema", ".json"), ("python", ".py")):
            if any(w.endswith(test) for w in m.where):
                kinds[kind] += 1
    return kinds


def _pofile(header_locale: str | None):
    import polib

    po = polib.POFile(wrapwidth=0)
    po.metadata = {
        "Project-Id-Version": DOMAIN,
        "Report-Msgid-Bugs-To": "",
        "Language": header_locale or "",
        "MIME-Version": "1.0",
        "Content-Type": "text/plain; charset=utf-8",
        "Content-Transfer-Encoding": "8bit",
        "Plural-Forms": PLURAL_FORMS.get(header_locale or "", "nplurals=INTEGER; plural=EXPRESSION;"),
    }
    return po


def _entry(m: Message, old=None):
    import polib

    entry = polib.POEntry(msgid=m.msgid, msgctxt=m.context, occurrences=[(w, "") for w in sorted(m.where)])
    if m.plural:
        entry.msgid_plural = m.plural
        entry.msgstr_plural = {0: ""}
        if old is not None and old.msgid_plural:
            entry.msgstr_plural = {0: old.msgstr_plural.get(0, "")}
        elif old is not None and old.msgstr:
            entry.msgstr_plural = {0: old.msgstr}
    elif old is not None:
        entry.msgstr = old.msgstr or (old.msgstr_plural.get(0, "") if old.msgid_plural else "")
    return entry


def _sorted(found):
    return [found[k] for k in sorted(found)]


def _save(po, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(str(po).rstrip("\n") + "\n", encoding="utf-8")


def _load(path: Path):
    import polib

    return polib.pofile(str(path), wrapwidth=0) if path.exists() else None


def _key(entry) -> tuple[str, str]:
    return (entry.msgctxt or "", entry.msgid)


def update(root: Path) -> int:
    found = extract(root)
    pot = _pofile(None)
    for m in _sorted(found):
        pot.append(_entry(m))
    _save(pot, paths(root)["pot"])
    for locale in LOCALES:
        path = po_path(root, locale)
        old = {_key(e): e for e in (_load(path) or []) if not e.obsolete}
        po = _pofile(locale)
        for m in _sorted(found):
            po.append(_entry(m, old.get(m.key)))
        _save(po, path)
        done = sum(1 for e in po if e.translated())
        print(f"{path.relative_to(root)}: {len(po)} messages, {done} translated")
    c = counts(found)
    print(f"extracted {len(found)} messages: {c['ts']} from TypeScript, {c['schema']} from the schema, "
          f"{c['python']} from Python")
    return 0


def translate(root: Path, source: Path, locale: str = "zh_CN") -> int:
    table = json.loads(source.read_text(encoding="utf-8"))
    path = po_path(root, locale)
    po = _load(path)
    if po is None:
        print(f"{path}: missing; run `update` first", file=sys.stderr)
        return 1
    used, changed = set(), 0
    for entry in po:
        key = None
        for candidate in (f"{entry.msgctxt}\u0004{entry.msgid}" if entry.msgctxt else None, entry.msgid):
            if candidate is not None and candidate in table:
                key = candidate
                break
        if key is None:
            continue
        used.add(key)
        value = table[key]
        text = value[0] if isinstance(value, list) else value
        if not isinstance(text, str):
            print(f"{source}: {key!r}: not a string", file=sys.stderr)
            return 1
        if entry.msgid_plural:
            if entry.msgstr_plural.get(0) != text:
                entry.msgstr_plural = {0: text}
                changed += 1
        elif entry.msgstr != text:
            entry.msgstr = text
            changed += 1
    _save(po, path)
    unused = sorted(set(table) - used)
    print(f"{source}: {len(used)} of {len(table)} translations used, {changed} changed in {path.relative_to(root)}")
    for key in unused:
        print(f"  not in the catalogue (no longer in the code?): {key!r}")
    return 0


def to_json(po, locale: str) -> str:
    """JupyterLab's frontend format (as jupyterlab-translate's converter writes it, without merging old files)."""
    result: dict = {"": {"domain": DOMAIN, "version": "", "language": locale.replace("_", "-"),
                         "plural_forms": po.metadata["Plural-Forms"]}}
    for entry in po:
        if entry.obsolete:
            continue
        key = f"{entry.msgctxt}\u0004{entry.msgid}" if entry.msgctxt else entry.msgid
        if entry.msgid_plural:
            forms = [v for _, v in sorted(entry.msgstr_plural.items()) if v]
            if forms:
                # JupyterLab takes a plural message as valid only with two or more forms; Chinese has one
                result[key] = [*forms, ""] if len(forms) == 1 else forms
        elif entry.msgstr:
            result[key] = [entry.msgstr]
    return json.dumps(result, sort_keys=True, indent=1, ensure_ascii=False) + "\n"


def to_mo(path: Path) -> bytes:
    import tempfile

    import polib

    # polib writes the .po's own header; babel's write_mo stamped the compile's time into it (POT-Creation-Date),
    # so two compiles of one .po differed and the committed .mo could never equal a fresh one.
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.mo"
        polib.pofile(str(path)).save_as_mofile(str(out))
        return out.read_bytes()


def compile_(root: Path) -> int:
    for locale in LOCALES:
        path = po_path(root, locale)
        po = _load(path)
        if po is None:
            print(f"{path}: missing; run `update` first", file=sys.stderr)
            return 1
        path.with_suffix(".json").write_text(to_json(po, locale), encoding="utf-8")
        path.with_suffix(".mo").write_bytes(to_mo(path))
        print(f"wrote {path.with_suffix('.json').relative_to(root)} and {path.with_suffix('.mo').name}")
    return 0


def placeholders(text: str) -> set[str]:
    return set(PLACEHOLDER.findall(text))


def problems(root: Path, locale: str = "zh_CN") -> list[str]:
    """Each message of the code without a translation, or whose translation's placeholders differ, one line each."""
    found = extract(root)
    po = _load(po_path(root, locale))
    entries = {_key(e): e for e in (po or []) if not e.obsolete}
    out = []
    for m in _sorted(found):
        label = f"{m.msgid!r}" + (f" (context {m.context!r})" if m.context else "") + f" [{', '.join(sorted(m.where))}]"
        entry = entries.get(m.key)
        if entry is None:
            out.append(f"not in the catalogue (run `update`): {label}")
            continue
        text = entry.msgstr_plural.get(0, "") if entry.msgid_plural else entry.msgstr
        if not text.strip():
            out.append(f"no {locale} translation: {label}")
            continue
        want = placeholders(m.msgid) | placeholders(m.plural or "")
        got = placeholders(text)
        if want != got:
            out.append(f"placeholders differ ({sorted(want)} in the English, {sorted(got)} in {locale}): {label}")
    return out


def check(root: Path) -> int:
    found = problems(root)
    for line in found:
        print(line)
    if found:
        print(f"{len(found)} problems; add translations to your JSON file, then run update, translate, compile")
        return 1
    print("every message has a zh_CN translation with the same placeholders")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=HERE.parent, help="the tree to work on (default: this checkout)")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("update")
    t = sub.add_parser("translate")
    t.add_argument("file", type=Path)
    sub.add_parser("compile")
    sub.add_parser("check")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    if args.command == "update":
        return update(root)
    if args.command == "translate":
        return translate(root, args.file)
    if args.command == "compile":
        return compile_(root)
    return check(root)


if __name__ == "__main__":
    sys.exit(main())
