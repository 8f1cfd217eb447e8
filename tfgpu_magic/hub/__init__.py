"""Faces that run beside a JupyterHub rather than inside a user's server: ``discovery`` (``tfgpu-discovery``), the
Prometheus HTTP service discovery of every user server's metrics at its internal address.

Nothing in ``tfgpu_magic.core`` imports this package; it needs ``tornado`` (which jupyter_server brings) and, to
check tokens, ``jupyterhub``.
"""
