"""One line before TensorFlow loads: `import tensorflow` takes 4-15 s, silent otherwise (issue 37). A finder first on
``sys.meta_path`` sees the import start, prints the line, and lets the real finders find TensorFlow; it finds nothing
itself. Stdlib only: ``%load_ext`` installs it."""

from __future__ import annotations

import sys

from ..core.i18n import _

NOTICE = "tfgpu: importing TensorFlow (a few seconds) ..."  # in English; said in the language in force


class ImportNotice:
    """Prints NOTICE when ``import tensorflow`` starts (the top-level name, not yet in sys.modules), once: another
    import hook (core/runtime.py's) asks the finders again for the same import."""

    def __init__(self, quiet=lambda: False):
        self._quiet = quiet
        self.told = False

    def find_spec(self, fullname, path=None, target=None):
        if fullname == "tensorflow" and path is None and not self.told and "tensorflow" not in sys.modules \
                and _importing():
            self.told = True
            if not self._quiet():
                # Flushed: a kernel sends it to the cell now, not after the import.
                print("tfgpu: " + _("importing TensorFlow (a few seconds) ..."), flush=True)
        return None


def _importing() -> bool:
    """Whether an `import tensorflow` asks, not a query (importlib.util.find_spec: "is it installed?"): the import
    machinery's frame for it is up the stack (the finders may be asked through another hook's find_spec first)."""
    frame = sys._getframe(2)
    for _step in range(12):
        if frame is None:
            return False
        if frame.f_code.co_name == "_find_and_load_unlocked" and frame.f_locals.get("name") == "tensorflow":
            return True
        frame = frame.f_back
    return False


def install(quiet=lambda: False) -> ImportNotice:
    notice = ImportNotice(quiet)
    sys.meta_path.insert(0, notice)
    return notice


def uninstall(notice: ImportNotice | None) -> None:
    if notice is not None and notice in sys.meta_path:
        sys.meta_path.remove(notice)
