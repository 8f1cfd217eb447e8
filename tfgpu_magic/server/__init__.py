"""The jupyter_server extension: the sidebar's authenticated REST endpoint (``{base_url}tfgpu/api/gpus``).

Loaded by ``tfgpu_magic._load_jupyter_server_extension``, enabled on install through the
``jupyter_server_config.d/tfgpu_magic.json`` that the wheel ships. Nothing here runs at import of the
package, and NVML is not touched until the first request.
"""

from __future__ import annotations


def load(server_app) -> None:
    from .handlers import setup_handlers

    setup_handlers(server_app)


def unload(server_app) -> None:
    """At the server's stop: end the NVML worker (a reading stuck in the driver is left to its daemon thread)."""
    feed = server_app.web_app.settings.pop("tfgpu_feed", None)
    if feed is not None:
        feed.close()
