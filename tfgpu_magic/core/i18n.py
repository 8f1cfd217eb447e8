"""The words a person reads, in their language: Python's ``gettext`` with the package's catalogue (the domain
``tfgpu_magic``, one for the sidebar and the Python side; ``locale/<lang>/LC_MESSAGES/tfgpu_magic.mo``, compiled
from the committed ``.po`` by ``scripts/catalogue.py compile``).

Which language, first that is set: the one a call asked for (``using(lang)``: the server answers each browser
in its own) > the one JupyterLab shows (the sidebar says it over the comm: ``set_language``) > the option
(``%config TfgpuMagics.language = "zh_CN"``: ``set_option``) > the locale (LANGUAGE, LC_ALL, LC_MESSAGES, LANG, as
gettext reads them). English, or a language without a catalogue, reads the msgids as written.

``_()`` translates at call time: a module-level string is marked with ``N_()`` and passed through ``_()`` where
it is used, so it follows a language chosen after import. No IPython here (core/).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import gettext
import os
import unicodedata
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

DOMAIN = "tfgpu_magic"
LOCALEDIR = Path(__file__).resolve().parent.parent / "locale"

# None: not chosen there (the next rule decides); "": English, chosen.
_comm_language: str | None = None  # the sidebar's (JupyterLab's) language, once a comm said it
_option_language: str | None = None  # TfgpuMagics.language ("" there: automatic)
_call_language: contextvars.ContextVar[str | None] = contextvars.ContextVar("tfgpu_language", default=None)


def normalize(code: object) -> str:
    """``"zh-CN"``, ``"zh_CN.UTF-8"``, ``"zh_Hans_CN"`` -> ``"zh_CN"``; English, "C", "POSIX", "" or not a
    string -> ``""`` (the msgids)."""
    if not isinstance(code, str):
        return ""
    code = code.strip().split(".", 1)[0].split("@", 1)[0].replace("-", "_")
    if not code or code in ("C", "POSIX") or code.lower().split("_", 1)[0] == "en":
        return ""
    parts = code.split("_")
    lang = parts[0].lower()
    region = next((p.upper() for p in parts[1:] if len(p) == 2), "")
    if lang == "zh" and not region:  # "zh", "zh_Hans": Simplified, the catalogue there is
        region = "TW" if any(p.lower() == "hant" for p in parts[1:]) else "CN"
    return f"{lang}_{region}" if region else lang


def _chosen(code: object) -> str | None:
    """None for no choice (None, "", blanks): the next rule decides; else the normalized code ("" for English)."""
    if code is None or (isinstance(code, str) and not code.strip()):
        return None
    return normalize(code)


def _from_locale() -> str:
    """The locale's language, by gettext's own order of variables (LANGUAGE may list several: the first wins)."""
    for var in ("LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG"):
        value = os.environ.get(var)
        if value:
            return normalize(value.split(":", 1)[0])
    return ""


def set_language(code: object) -> str | None:
    """The language JupyterLab shows ("en" is English, whatever the locale; None or "" forgets it: the option, then
    the locale decide). Returns it, normalized."""
    global _comm_language
    _comm_language = _chosen(code)
    return _comm_language


def set_option(code: object) -> str | None:
    """The option's language (``TfgpuMagics.language``; "" = automatic). Returns it, normalized."""
    global _option_language
    _option_language = _chosen(code)
    return _option_language


def language() -> str:
    """The language words are given in now: ``"zh_CN"``, or ``""`` for English."""
    asked = _call_language.get()
    if asked is not None:
        return asked
    for chosen in (_comm_language, _option_language):
        if chosen is not None:
            return chosen
    return _from_locale()


@contextlib.contextmanager
def using(code: object) -> Iterator[str]:
    """Within this block (this thread or task only), words are in ``code``'s language whatever else is set:
    the server's answer to one browser. ``None`` or "" leaves the usual rule in force."""
    token = _call_language.set(_chosen(code))
    try:
        yield language()
    finally:
        _call_language.reset(token)


@functools.lru_cache(maxsize=16)
def translation(code: str) -> gettext.NullTranslations:
    """The catalogue of a language (normalized); English and a language without one: the msgids as written."""
    code = normalize(code)
    if not code:
        return gettext.NullTranslations()
    languages = [code, code.split("_", 1)[0]]
    return gettext.translation(DOMAIN, str(LOCALEDIR), languages=languages, fallback=True)


def _(message: str) -> str:
    """``message`` in the language now in force (itself in English)."""
    code = language()
    return translation(code).gettext(message) if code else message


def ngettext(singular: str, plural: str, n: int) -> str:
    """The form for ``n`` in the language now in force."""
    code = language()
    if code:
        return translation(code).ngettext(singular, plural, n)
    return singular if n == 1 else plural


def N_(message: str) -> str:  # gettext's own name for "mark, translate later"
    """Marks ``message`` for the catalogue without translating it: translate it with ``_()`` where it is used."""
    return message


class Said(str):
    """A sentence in the language in force when it was made, that can be made again in another: a server's answer is
    made once and shared by every browser, and ``localize`` says it again in one browser's language. It is a plain
    ``str`` to everything else (JSON, comparisons, the metrics)."""

    __slots__ = ("_make",)

    def __new__(cls, make: Callable[[], str]) -> Said:
        said = super().__new__(cls, make())
        said._make = make
        return said

    def again(self) -> str:
        """The sentence in the language in force now."""
        return self._make()


def said(make: Callable[[], str]) -> Said:
    """``make()`` now, remembered for ``localize``: ``said(lambda: _("idle {span}").format(span=...))``."""
    return Said(make)


def localize(value: Any) -> Any:
    """A copy of ``value`` (dicts, lists and tuples walked) with every ``Said`` made again in the language in force;
    ``value`` itself is left as it is."""
    if isinstance(value, Said):
        return value.again()
    if isinstance(value, dict):
        return {key: localize(item) for key, item in value.items()}
    if isinstance(value, list) or type(value) is tuple:
        return type(value)(localize(item) for item in value)
    return value


def width(text: str) -> int:
    """Display columns of ``text``: a wide (CJK) character counts two, as a terminal shows it. A first line's limit
    (120) is in these, so a Chinese line keeps to the same width as an English one."""
    return sum(2 if unicodedata.east_asian_width(c) in ("W", "F") else 1 for c in text)
