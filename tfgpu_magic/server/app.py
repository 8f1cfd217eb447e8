"""The extension as jupyter_server knows it: an ExtensionApp, so the server starts and stops it with itself.

A stop hook is why it is an app and not a plain module: the sampler's thread and the culler's task end when the
server stops (jupyter_server calls ``stop_extension`` for apps only).
"""

from __future__ import annotations

from jupyter_server.extension.application import ExtensionApp

from . import schema_words
from .handlers import Extension


class TfgpuExtensionApp(ExtensionApp):
    name = "tfgpu_magic"
    load_other_extensions = True

    def initialize_handlers(self) -> None:
        self.tfgpu = Extension(self.serverapp)
        schema_words.install()

    async def _start_jupyter_server_extension(self, serverapp) -> None:
        self.tfgpu.start()

    async def stop_extension(self) -> None:
        self.tfgpu.stop()
