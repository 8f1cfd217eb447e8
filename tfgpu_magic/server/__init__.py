"""The jupyter_server extension: the sidebar's and the scrapers' authenticated REST endpoints
(``{base_url}tfgpu/api/gpus``, ``.../metrics``), the server's GPU history and the GPU-aware culler.

Found through ``tfgpu_magic._jupyter_server_extension_points`` (app.TfgpuExtensionApp), enabled on install
through the ``jupyter_server_config.d/tfgpu_magic.json`` that the wheel ships. Nothing here runs at import of
the package; NVML is first read in the extension's own worker thread once the server runs.
"""
