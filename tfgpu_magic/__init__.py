"""tfgpu_magic: see and control TensorFlow's GPU configuration from a notebook.

The package's own hooks (IPython's ``%load_ext``, the Jupyter server extension, the prebuilt labextension)
and its public names. Importing it is cheap on purpose: it never imports TensorFlow, never initialises NVML
and never starts a thread. The heavy parts load on first use.

Layers, each importing only those below it: ``core/`` (plain data and typed results), ``render/`` (text and
HTML), then the faces: ``ipython/`` (the magic, the panel, the sidebar's kernel channel), ``server/`` (the
Jupyter server extension), and ``api.py`` and ``cli.py`` here.
"""

from __future__ import annotations

from .core.version import __version__
from .core.warn import TfgpuWarning, warn


def _jupyter_labextension_paths():
    """Where JupyterLab finds the prebuilt sidebar (shipped by the wheel as shared-data too)."""
    return [{"src": "labextension", "dest": "tfgpu_magic"}]


def _jupyter_server_extension_points():
    # Imported here, not at package import: `%load_ext` in a kernel must not import jupyter_server or tornado.
    from .server.app import TfgpuExtensionApp

    return [{"module": "tfgpu_magic", "app": TfgpuExtensionApp}]


def load_ipython_extension(ipython):
    from .ipython.magics import load_extension

    load_extension(ipython)


def unload_ipython_extension(ipython):
    from .ipython.magics import unload_extension

    unload_extension(ipython)


class _Configure:
    """The configuring magics as one call: ``configure(cpus=3, growth=True, limit="2GB")``.

    Each keyword is a setting of ``%tfgpu help`` and takes the magic's forms (``visible="1,3"`` or ``[1, 3]``,
    ``limit="40%"`` or MiB as an int, ``virtual="2x2GB"``, ``"off"``); the magics' options are keywords too: ``gpu``
    (``--gpu``), ``min_free`` and ``wait`` (``visible="auto", min_free="20GB", wait="10m"``). Returns one Outcome
    per setting given; a bad value or an unknown keyword raises ``ValueError`` (a ``PlanError``) before anything
    changes."""

    def __call__(self, *, gpu=None, **settings):
        from .core.importguard import apart_from_tensorflow_import, first_run_over

        with apart_from_tensorflow_import("configure"):
            from .api import configure as _configure

            try:
                return _configure(gpu=gpu, **settings)
            finally:
                first_run_over("configure")

    @property
    def __signature__(self):
        # The registry's keywords (help(), Tab and inspect show them), read when asked: `import tfgpu_magic` stays
        # free of the core.
        from .api import signature

        return signature()

    def __repr__(self) -> str:
        return f"<function tfgpu_magic.configure{self.__signature__}>"


configure = _Configure()


def snapshot(*, list_devices=False):
    """Everything the kernel knows now, as one object with ``to_dict()``, ``to_text()`` and HTML."""
    from .core.importguard import apart_from_tensorflow_import, first_run_over

    with apart_from_tensorflow_import("snapshot"):
        from .api import snapshot as _snapshot

        try:
            return _snapshot(list_devices=list_devices)
        finally:
            first_run_over("snapshot")


def __getattr__(name: str):
    # The panel imports ipywidgets: loaded when asked for (`tfgpu_magic.Panel()`), never at `import tfgpu_magic`.
    if name == "Panel":
        from .ipython.panel import Panel

        return Panel
    raise AttributeError(f"module 'tfgpu_magic' has no attribute {name!r}")


__all__ = ["Panel", "TfgpuWarning", "__version__", "configure", "snapshot", "warn"]
