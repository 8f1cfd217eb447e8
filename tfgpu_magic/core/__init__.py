"""The core: settings, the TensorFlow and NVML adapters, placement capture, the snapshot and the live model.

Plain data and typed results only. Nothing under ``core/`` imports IPython, ipywidgets, ipykernel, comm,
tornado or jupyter_server, nor anything of ``render/``, ``ipython/`` or ``server/`` (tests/core/test_layout.py
holds it to that). Importing this package imports none of its modules.
"""
