"""Fixtures of the server tests: a real jupyter_server in this process (pytest-jupyter's ``jp_fetch``, under the base
URL ``/a%40b/``) whose NVML is the fake library handed to pynvml in this process (``fakenvml.in_process``)."""

from __future__ import annotations

import pytest
from fakenvml import IN_PROCESS_LIB_NAME, FakeNvmlUnavailable, build_fake_nvml, in_process, three_gpus

# pytest-jupyter has no entry point, and here is the only folder that needs it: its fixtures (jp_fetch and the
# rest, its autouse event loop and server clean-up) and its hooks (async tests) hold for the tests in this folder.
from pytest_jupyter.jupyter_server import *  # noqa: F403
from serverapi import FakeGpus

EXTENSION = {"ServerApp": {"jpserver_extensions": {"tfgpu_magic": True}}}


@pytest.fixture
def jp_server_config():
    # max age 0: each request reads the fake as the test just wrote it; no sampler reading the fake while a test
    # swaps it (the history's own tests sample)
    return {**EXTENSION, "TfgpuServer": {"snapshot_max_age": 0.0, "history_interval": 0.0}}


@pytest.fixture(scope="session")
def in_process_lib(tmp_path_factory):
    try:
        return build_fake_nvml(tmp_path_factory.mktemp("fakenvml_in_process"), lib_name=IN_PROCESS_LIB_NAME)
    except FakeNvmlUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture
def fake_gpus(in_process_lib, tmp_path):
    """The fake NVML, in this process, showing three GPUs until the test writes another config."""
    gpus = FakeGpus(tmp_path / "fake_nvml.cfg")
    gpus.write(three_gpus())
    with in_process(in_process_lib, gpus.path):
        yield gpus
