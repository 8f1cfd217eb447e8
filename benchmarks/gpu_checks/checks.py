"""The checks of benchmarks/gpu_check.py, each a table row: their names, and the functions that run the
children and nvidia-smi (children.py) and judge what they return (compare.py)."""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

from tfgpu_magic.core import nvml

from .children import (
    CHECKS,
    CHILD_PRELUDE,
    NUMBERING_CHILD,
    REPO,
    SIGNATURE_CHILD,
    TF_PROBE,
    Budget,
    NvidiaSmiFailed,
    NvidiaSmiMissing,
    _last_line,
    child_env,
    memory_holder,
    nvidia_smi,
    run_child,
)
from .compare import (
    APPS_QUERY,
    BLOCK_MIB,
    CONTEXT_ALLOWANCE_MIB,
    CSV_FORMAT,
    FAILED,
    GPU_QUERY,
    NOT_RUN,
    PASSED,
    PROCESS_MEMORY_RULE,
    CheckResult,
    attribution_problems,
    compare_cuda_version,
    compare_gpu_fields,
    compare_processes,
    compare_signatures,
    comparison_result,
    fake_reference_config,
    field_signature,
    find_process,
    gpu_fields_summary,
    numbering_problems,
    self_marking_problems,
)

CHECK_GPU_FIELDS = "nvidia-smi vs NVML: GPU fields"
CHECK_CUDA = "nvidia-smi vs NVML: CUDA driver version"
CHECK_APPS = "nvidia-smi vs NVML: compute processes"
CHECK_ATTRIBUTION = "attribution: a child's 1 GiB shows under its pid, name and user"
CHECK_SELF = "attribution: is_self marks the reading process only"
CHECK_NUMBERING = "numbering: configure(visible=k) makes CUDA device 0 the GPU NVML calls k"
CHECK_FIDELITY = "fake NVML: field types and N/A match the real driver's"
NVML_CHECKS = (CHECK_GPU_FIELDS, CHECK_CUDA, CHECK_APPS, CHECK_ATTRIBUTION, CHECK_SELF, CHECK_NUMBERING,
               CHECK_FIDELITY)
NO_TF_CUDA = "TensorFlow with CUDA is not installed here"
TF_CHECKS = tuple(f"TensorFlow: {name}" for name in CHECKS)


def _smi_failure(check: str, exc: Exception) -> CheckResult:
    return CheckResult(check, "nvml", NOT_RUN if isinstance(exc, NvidiaSmiMissing) else FAILED,
                       f"not run: {exc}" if isinstance(exc, NvidiaSmiMissing) else str(exc))


def check_gpu_fields(budget: Budget) -> tuple[list[CheckResult], dict[str, Any]]:
    """The GPU fields and the CUDA version, each against a snapshot taken right after nvidia-smi answered."""
    try:
        fields_text = nvidia_smi(f"--query-gpu={','.join(GPU_QUERY)}", CSV_FORMAT, budget=budget)
        snap = nvml.snapshot().to_dict()
        header = nvidia_smi(budget=budget)
    except (NvidiaSmiMissing, NvidiaSmiFailed) as exc:
        return [_smi_failure(CHECK_GPU_FIELDS, exc), _smi_failure(CHECK_CUDA, exc)], nvml.snapshot().to_dict()
    try:
        comparisons = compare_gpu_fields(fields_text, snap)
        fields = comparison_result(CHECK_GPU_FIELDS, comparisons, gpu_fields_summary(comparisons))
    except ValueError as exc:
        fields = CheckResult(CHECK_GPU_FIELDS, "nvml", FAILED, str(exc))
    cuda = compare_cuda_version(header, snap)
    versions = comparison_result(CHECK_CUDA, [cuda], f"both say {cuda.smi}")
    return [fields, versions], snap


def check_processes(snap: dict[str, Any], apps_text: str, context: str) -> CheckResult:
    try:
        comparisons = compare_processes(apps_text, snap)
    except ValueError as exc:
        return CheckResult(CHECK_APPS, "nvml", FAILED, str(exc))
    listed = len({c.field.split()[1] for c in comparisons if c.field.startswith("pid ")})
    return comparison_result(CHECK_APPS, comparisons, f"{listed} process(es) agree in pid, GPU, memory "
                             f"({PROCESS_MEMORY_RULE.tolerance.describe('MiB')}) and name; {context}")


def check_attribution(budget: Budget) -> tuple[list[CheckResult], dict[str, Any] | None, int | None]:
    """The process comparison, attribution and is_self (in table order), while a child holds GPU memory. Also
    returns this process's snapshot and the child's pid, for the field signature."""
    with memory_holder(budget) as child:
        if "pid" not in child:
            why = child.get("not_run") or child.get("error")
            ran = "not_run" not in child
            result, detail = (FAILED, f"the child failed: {why}") if ran else (NOT_RUN, f"not run: {why}")
            rows = [CheckResult(CHECK_ATTRIBUTION, "nvml", result, detail),
                    CheckResult(CHECK_SELF, "nvml", result, detail)]
            try:
                apps = nvidia_smi(f"--query-compute-apps={','.join(APPS_QUERY)}", CSV_FORMAT, budget=budget)
            except (NvidiaSmiMissing, NvidiaSmiFailed) as exc:
                return [_smi_failure(CHECK_APPS, exc), *rows], None, None
            context = f"no process of this check was on the GPU ({why})"
            return [check_processes(nvml.snapshot().to_dict(), apps, context), *rows], None, None
        pid = child["pid"]
        parent = nvml.snapshot().to_dict()
        try:
            apps = nvidia_smi(f"--query-compute-apps={','.join(APPS_QUERY)}", CSV_FORMAT, budget=budget)
            apps_error = None
        except (NvidiaSmiMissing, NvidiaSmiFailed) as exc:
            apps, apps_error = "", exc
            apps_snap = parent
        else:
            apps_snap = nvml.snapshot().to_dict()
    name = os.path.basename(sys.executable)[:15]  # the child's comm: the executed file's name
    user = pwd.getpwuid(os.getuid()).pw_name
    data = {"backend": child["backend"], "pid": pid, "entry": (find_process(parent, pid) or (None, None))[1]}
    problems = attribution_problems(parent, pid, name=name, user=user)
    if problems:
        attribution = CheckResult(CHECK_ATTRIBUTION, "nvml", FAILED, "; ".join(problems), data)
    else:
        index, entry = find_process(parent, pid)
        attribution = CheckResult(CHECK_ATTRIBUTION, "nvml", PASSED,
                                  f"pid {pid} ({entry['name']}, user {entry['user']}) holds {entry['used_mib']} "
                                  f"MiB on GPU {index} for a {BLOCK_MIB} MiB block ({child['backend']}); "
                                  f"allowed up to {CONTEXT_ALLOWANCE_MIB} MiB more for the CUDA context", data)
    problems = self_marking_problems(child["snapshot"], pid, parent, os.getpid())
    marking = CheckResult(CHECK_SELF, "nvml", FAILED if problems else PASSED, "; ".join(problems) or
                          f"the child's own snapshot marks its pid {pid} and nothing else; this process's snapshot "
                          "does not mark it")
    if apps_error is not None:
        processes = _smi_failure(CHECK_APPS, apps_error)
    else:
        processes = check_processes(apps_snap, apps, f"taken while this check's child held {BLOCK_MIB} MiB")
    return [processes, attribution, marking], parent, pid


def check_numbering(snap: dict[str, Any], budget: Budget) -> CheckResult:
    count = len(snap.get("gpus", []))
    index = count - 1  # the last GPU: index 0 would pass even if the setting were ignored
    report = run_child(NUMBERING_CHILD, budget, str(index))
    one_gpu = " (this machine has one GPU, so only index 0 could be tested)" if count == 1 else ""
    if "not_run" in report:
        env = ", ".join(f"{k}={v}" for k, v in report.get("env", {}).items())
        return CheckResult(CHECK_NUMBERING, "nvml", NOT_RUN, f"not run: {report['not_run']} (configure set {env})",
                           report)
    if "error" in report:
        return CheckResult(CHECK_NUMBERING, "nvml", FAILED, f"the child failed: {report['error']}", report)
    problems = numbering_problems(report, index, snap)
    if problems:
        return CheckResult(CHECK_NUMBERING, "nvml", FAILED, "; ".join(problems) + one_gpu, report)
    return CheckResult(CHECK_NUMBERING, "nvml", PASSED,
                       f"configure(visible=\"{index}\") set CUDA_VISIBLE_DEVICES={index} and CUDA_DEVICE_ORDER="
                       f"PCI_BUS_ID; {report['backend']} sees one device at PCI {report['bus_id']}, NVML's GPU "
                       f"{index}{one_gpu}", report)


def check_fidelity(real: dict[str, str], real_hardware: bool, budget: Budget) -> CheckResult:
    """The real snapshot's field signature against the fake library's, built here with gcc when there is one."""
    note = "" if real_hardware else " (this run read the fake library itself, so this only exercises the check)"
    tests_dir = str(REPO / "tests" / "support")
    if tests_dir not in sys.path:
        sys.path.insert(0, tests_dir)
    try:
        from fakenvml import FakeNvmlUnavailable, build_fake_nvml, fake_env, write_config
    except ImportError as exc:
        return CheckResult(CHECK_FIDELITY, "nvml", NOT_RUN, f"not run: tests/support/fakenvml is not here ({exc}); "
                           "the real signature is in the JSON (field_signature) for tests/gpu/test_gpu_check.py")
    with tempfile.TemporaryDirectory(prefix="gpu-check-fakenvml-") as folder:
        try:
            library = build_fake_nvml(folder)
        except FakeNvmlUnavailable as exc:
            return CheckResult(CHECK_FIDELITY, "nvml", NOT_RUN, f"not run: {exc}; the real signature is in the "
                               "JSON (field_signature) for tests/gpu/test_gpu_check.py")
        except subprocess.CalledProcessError as exc:
            return CheckResult(CHECK_FIDELITY, "nvml", FAILED, f"the fake did not compile: {_last_line(exc.stderr)}")
        config = write_config(Path(folder) / "reference.cfg", fake_reference_config(real))
        report = run_child(SIGNATURE_CHILD, budget, env=fake_env(library.parent, config, base=child_env()))
    if "error" in report:
        return CheckResult(CHECK_FIDELITY, "nvml", FAILED, f"the fake's child failed: {report['error']}")
    fake = field_signature(report["snapshot"], {report["pid"]})
    differences, skipped = compare_signatures(real, fake)
    data = {"fake_signature": fake, "differences": differences, "not_compared": skipped}
    if differences:
        return CheckResult(CHECK_FIDELITY, "nvml", FAILED, "; ".join(differences) + note, data)
    unchecked = "; process entry fields not compared (no process of this check on the GPU)" if skipped else ""
    return CheckResult(CHECK_FIDELITY, "nvml", PASSED,
                       f"{len(real)} fields: same types and N/A reasons{unchecked}{note}", data)

def tensorflow_checks(budget: Budget) -> list[CheckResult]:
    """The TensorFlow checks, each in a fresh process; only where TensorFlow imports and lists a GPU."""
    probe = run_child(TF_PROBE, budget)
    if "error" in probe:
        why = f"import tensorflow failed: {probe['error']}"
    elif not probe["installed"]:
        why = "TensorFlow is not installed"
    elif probe["gpus"] == 0:
        why = f"TensorFlow {probe['version']} is installed and lists no GPU"
    else:
        why = None
    if why is not None:
        return [CheckResult(name, "tensorflow", NOT_RUN, f"not run: {NO_TF_CUDA} ({why})") for name in TF_CHECKS]
    results = []
    for name, code in zip(TF_CHECKS, CHECKS.values(), strict=True):
        if budget.spent():
            results.append(CheckResult(name, "tensorflow", NOT_RUN, "not run: the run's time budget was spent"))
            continue
        outcome = run_child(CHILD_PRELUDE + textwrap.dedent(code), budget, cap=120)
        if "error" in outcome:
            results.append(CheckResult(name, "tensorflow", FAILED, f"the child failed: {outcome['error']}"))
        else:
            results.append(CheckResult(name, "tensorflow", PASSED if outcome["ok"] else FAILED, outcome["detail"]))
    return results

