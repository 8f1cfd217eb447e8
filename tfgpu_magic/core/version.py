"""The package's version and every schema and protocol version, in one place.

The version has one source, ``package.json``: hatch reads it (hatch-nodejs-version) and writes
``_version.py`` beside this file at build time, editable installs included. The frontend names the same
five schema and protocol versions in ``labextension/src/constants.ts``; tests/core/test_contracts.py checks
that both sides agree.
"""

from __future__ import annotations

try:
    from ._version import __version__
except ImportError:  # a source tree that was never built or installed: ask the installed metadata
    from importlib.metadata import PackageNotFoundError, version

    try:
        __version__ = version("tfgpu_magic")
    except PackageNotFoundError:
        __version__ = "0+unknown"

SNAPSHOT_SCHEMA = 1  # Snapshot.to_dict(), `tfgpu status --json` and the live model's kernel section
GPUS_SCHEMA = 1  # the server's GET tfgpu/api/gpus document
COMM_PROTOCOL = 1  # messages on the kernel comm `tfgpu`, both ways
COMM_OPEN_VERSION = 1  # the sidebar's comm open request ({"request": "subscribe", "version": 1})
SAVED_VERSION = 1  # the notebook metadata `tfgpu` document

__all__ = ["COMM_OPEN_VERSION", "COMM_PROTOCOL", "GPUS_SCHEMA", "SAVED_VERSION", "SNAPSHOT_SCHEMA", "__version__"]
