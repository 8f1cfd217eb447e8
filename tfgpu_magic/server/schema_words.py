"""The sidebar's settings in the Settings editor, in the user's language, from tfgpu_magic's own catalogue.

JupyterLab's server translates a settings schema (what the Settings editor shows) with gettext in the domain the
schema's ``jupyter.lab.internationalization`` names, but looks for that domain's ``.mo`` only in the installed
language pack (jupyterlab_server's ``TranslationBundle.update_locale``, "TODO: handle packages that provide their
own .mo files"). The bundle registered here for our domain reads ``tfgpu_magic/locale`` instead. It goes through
jupyterlab_server's translator class; a version that changes it leaves the schema in English (no error), and
tests/browser/test_browser_zh.py notices.
"""

from __future__ import annotations

import gettext

from ..core.i18n import DOMAIN, LOCALEDIR


def install() -> bool:
    """Register the bundle; False where JupyterLab's server (or its translator's shape) is not there."""
    try:
        from jupyterlab_server.translation_utils import TranslationBundle, translator
    except ImportError:  # a server without JupyterLab: no Settings editor either
        return False
    bundles = getattr(translator, "_TRANSLATORS", None)
    if not isinstance(bundles, dict):
        return False

    class OwnCatalogue(TranslationBundle):
        def update_locale(self, locale_: str) -> None:
            self._locale = locale_
            self._translator = gettext.translation(DOMAIN, localedir=str(LOCALEDIR), languages=(locale_,),
                                                   fallback=True)

    # translator.load(domain) hands out the bundle registered under the domain, and set_locale (each settings
    # request, with the page's language) updates every registered bundle.
    bundles[translator.normalize_domain(DOMAIN)] = OwnCatalogue(DOMAIN, getattr(translator, "_LOCALE", "en"))
    return True
