"""`tfgpu_magic.configure()` takes the magics' keywords, every one: docs/reference.md's
`configure(visible="auto", min_free="20GB", wait="10m")` raised TypeError where the package's public function
copied the API's signature without min_free and wait."""

from __future__ import annotations

import inspect
import json

from fakenvml import MIB, three_gpus

import tfgpu_magic
from tfgpu_magic import api
from tfgpu_magic.core import settings


def test_the_public_configure_has_the_apis_keywords():
    public = inspect.signature(tfgpu_magic.configure).parameters.keys()
    assert public == api.signature().parameters.keys()
    assert {"min_free", "wait", "gpu", *settings.names()} <= public


def test_the_readmes_call_chooses_a_gpu_with_20gb_free(fake_nvml):
    config = three_gpus()
    for k, gpu in enumerate(config["gpus"]):  # the H100 (GPU 1) has 30 GiB free and no other process, the others 1 GiB
        gpu.update(memory_used=gpu["memory_total"] - (30 if k == 1 else 1) * 1024 * MIB)
    config["gpus"][1]["processes"] = []
    fake_nvml.write(config)
    out = fake_nvml.run_json(
        "import json, os, tfgpu_magic\n"
        "[outcome] = tfgpu_magic.configure(visible='auto', min_free='20GB', wait='10m')\n"
        "print(json.dumps([outcome.status.value, outcome.detail, os.environ.get('CUDA_VISIBLE_DEVICES')]))")
    _, detail, visible = out
    assert "auto chose GPU 1" in detail and visible == "1", json.dumps(out)
