"""GPU check: on a machine with an NVIDIA GPU, check the NVML adapter against the driver and the GPU paths
of %tfgpu for real. CI has no GPU: there this script's logic runs against a fake libnvidia-ml.so.1 and a
fake nvidia-smi (tests/gpu/test_gpu_check.py), and the GPU paths are checked call by call
(tests/gpu/test_gpu_paths.py).

Two parts, each check in its own row:
- NVML, needing neither TensorFlow nor IPython: ``nvml.snapshot()`` against nvidia-smi field by field;
  process attribution and physical-index numbering, with a child process that starts CUDA through PyTorch
  (or CuPy); and the type / N/A signature of every snapshot field, compared with the fake library's.
- TensorFlow: each check in a fresh process (its runtime starts once per process), run only where
  TensorFlow imports and lists a GPU.

It prints one table (check | result | detail; result is passed, failed or not run) and, with --json, writes
the same as JSON. Exit status 1 only when a check that ran failed. Without NVML it prints a "no GPU" report
and exits 0. No network; under two minutes.

Run from the repository root:  python3 benchmarks/gpu_check.py --json gpu_check.json

This file is the runner: the command line, the time budget, the order of the checks, the table and the
JSON. The checks themselves are in gpu_checks/: compare.py (pure comparisons), children.py (the child
processes and nvidia-smi) and checks.py (the checks that combine them).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent  # gpu_checks/ is here: on sys.path already when run as a script
for folder in (REPO, HERE):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from gpu_checks.checks import (  # noqa: E402  (needs the path above when not run as a script)
    CHECK_APPS,
    CHECK_ATTRIBUTION,
    CHECK_CUDA,
    CHECK_FIDELITY,
    CHECK_GPU_FIELDS,
    CHECK_NUMBERING,
    CHECK_SELF,
    NVML_CHECKS,
    TF_CHECKS,
    check_attribution,
    check_fidelity,
    check_gpu_fields,
    check_numbering,
    tensorflow_checks,
)
from gpu_checks.children import Budget  # noqa: E402
from gpu_checks.compare import (  # noqa: E402
    APPS_QUERY,
    FAILED,
    FAKE_REFERENCE_CONFIG,
    GPU_FIELD_RULES,
    GPU_QUERY,
    NOT_RUN,
    CheckResult,
    agree,
    attribution_problems,
    compare_cuda_version,
    compare_gpu_fields,
    compare_processes,
    compare_signatures,
    field_signature,
    gpu_fields_summary,
    numbering_problems,
    parse_csv,
    same_process_name,
    self_marking_problems,
)

from tfgpu_magic.core import nvml  # noqa: E402  (needs the path above when run as a script)

# What tests/gpu/test_gpu_check.py reads from this module, besides what the runner itself uses.
__all__ = [
    "APPS_QUERY", "CHECK_APPS", "CHECK_ATTRIBUTION", "CHECK_CUDA", "CHECK_FIDELITY", "CHECK_GPU_FIELDS",
    "CHECK_NUMBERING", "CHECK_SELF", "FAKE_REFERENCE_CONFIG", "GPU_FIELD_RULES", "GPU_QUERY", "NVML_CHECKS",
    "TF_CHECKS", "agree", "attribution_problems", "compare_cuda_version", "compare_gpu_fields",
    "compare_processes", "compare_signatures", "field_signature", "gpu_fields_summary", "main",
    "numbering_problems", "parse_csv", "same_process_name", "self_marking_problems",
]

TIME_BUDGET_S = 110.0  # the whole run, so it ends within two minutes even when children hang
# The fake library reads its GPUs from the file this variable names and shows none without it, so a run
# that found GPUs with it unset read a real driver.
FAKE_NVML_CONFIG_ENV = "FAKE_NVML_CONFIG"


def signature_document(signature: dict[str, str], snap: nvml.NvmlSnapshot, real: bool) -> dict[str, Any]:
    """What --signature-out writes (and benchmarks/gpu_field_signature.json holds once a real run made it)."""
    try:
        from importlib.metadata import version

        binding = version("nvidia-ml-py")
    except Exception:
        binding = None
    return {
        "from_real_hardware": real,
        "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host": platform.node(),
        "gpus": [g.name for g in snap.gpus if isinstance(g.name, str)],
        "driver_version": nvml.to_jsonable(snap.driver_version),
        "cuda_driver_version": nvml.to_jsonable(snap.cuda_driver_version),
        "nvml_library": loaded_nvml_library(),
        "nvidia_ml_py": binding,
        "signature": signature,
    }


def loaded_nvml_library() -> str | None:
    """The libnvidia-ml file this process loaded (after a snapshot): the driver's, or a test's fake."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                if "libnvidia-ml" in line:
                    return line.split()[-1]
    except OSError:
        pass
    return None


def run_checks(snap: nvml.NvmlSnapshot, budget: Budget) -> tuple[list[CheckResult], dict[str, Any]]:
    """Every check, in table order, and the field signature record for the JSON."""
    fields, snap_dict = check_gpu_fields(budget)
    processes, parent, child_pid = check_attribution(budget)
    real_hardware = FAKE_NVML_CONFIG_ENV not in os.environ
    signature = field_signature(parent or snap_dict, {child_pid} if child_pid else ())
    results = [*fields, *processes, check_numbering(snap_dict, budget),
               check_fidelity(signature, real_hardware, budget), *tensorflow_checks(budget)]
    return results, signature_document(signature, snap, real_hardware)


def render_table(results: Sequence[CheckResult]) -> str:
    lines = ["| check | result | detail |", "|---|---|---|"]
    for r in results:
        detail = r.detail.replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {r.check} | {r.result} | {detail} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON to PATH")
    parser.add_argument("--signature-out", metavar="PATH",
                        help="write the snapshot's field signature to PATH (benchmarks/gpu_field_signature.json "
                        "after a run on real hardware)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    budget = Budget(TIME_BUDGET_S)

    snap = nvml.snapshot()
    print(f"# GPU check on {platform.node()} ({platform.machine()}, Python {platform.python_version()})")
    signature = None
    if not snap.available or not snap.gpus:
        why = snap.error.detail if snap.error else "NVML reports no GPU"
        print(f"no GPU: {why}. Nothing to check here; the GPU paths are checked call by call in "
              "tests/gpu/test_gpu_paths.py.")
        # The reason is on the line above (and in the JSON's "nvml"): not repeated in every row.
        results = [CheckResult(name, "nvml", NOT_RUN, "not run: no GPU") for name in NVML_CHECKS]
        results += [CheckResult(name, "tensorflow", NOT_RUN, "not run: no GPU") for name in TF_CHECKS]
    else:
        print(f"driver {snap.driver_version}, CUDA {snap.cuda_driver_version}; GPUs: "
              + "; ".join(f"{g.index}: {g.name}, {g.memory_total_mib} MiB" for g in snap.gpus))
        results, signature = run_checks(snap, budget)
    print()
    print(render_table(results), flush=True)

    status = 1 if any(r.result == FAILED for r in results) else 0
    if args.json:
        document = {
            "host": platform.node(),
            "python": platform.python_version(),
            "seconds": round(time.monotonic() - started, 1),
            "nvml": {"available": snap.available, "error": nvml.to_jsonable(snap.error),
                     "library": loaded_nvml_library(), "driver_version": nvml.to_jsonable(snap.driver_version),
                     "cuda_driver_version": nvml.to_jsonable(snap.cuda_driver_version),
                     "gpus": [nvml.to_jsonable(g.name) for g in snap.gpus]},
            "checks": [asdict(r) for r in results],
            "field_signature": signature,
            "exit_status": status,
        }
        Path(args.json).write_text(json.dumps(document, indent=2) + "\n")
    if args.signature_out and signature is not None:
        Path(args.signature_out).write_text(json.dumps(signature, indent=2) + "\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
