"""benchmarks/gpu_check.py on a machine without a GPU: a clear report, exit 0."""

import subprocess
import sys
from pathlib import Path

from conftest import tf_env

SCRIPT = Path(__file__).parent.parent / "benchmarks" / "gpu_check.py"


def test_gpu_check_says_no_gpu_without_nvml(tmp_path):
    env = tf_env(LD_LIBRARY_PATH=str(tmp_path))  # an empty folder: no libnvidia-ml.so.1 to find
    proc = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "no GPU:" in proc.stdout and "not found" in proc.stdout
