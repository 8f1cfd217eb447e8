"""The snapshot's text in a shell's words, for ``tfgpu status|devices``: the same pieces as the notebook's text
(render/text.py), with the words that only mean something in a notebook said for a shell. The command is no kernel
and holds no settings or GPU memory; TensorFlow's GPU names are predicted unless it was asked to import TensorFlow;
a process the Jupyter server knows as a notebook's kernel is named by its notebook."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from ..core.i18n import N_, _
from ..core.runtime import TFState
from . import text
from .snapshot import ShownSnapshot

# Where a notebook's sentence is also true in a shell once a few words change. Each pair is applied to whole
# sentences, before they are wrapped.
_SHELL_WORDS = (
    (N_("then restart the kernel"), N_("then restart the kernels that use it")),
    (N_("`%tfgpu visible` sets PCI_BUS_ID"),
     N_("export CUDA_DEVICE_ORDER=PCI_BUS_ID (`%tfgpu visible` sets it in a notebook)")),
    (N_("this kernel"), N_("this shell")),
)
_PROCESS_HEADER = (text.PROCESS_HEAD, N_("processes (*: this command)"))
NO_SETTINGS = N_("Settings: none in a shell (set them in a notebook: %tfgpu help)")  # translated where said


def said_in_a_shell(sentence: str | None) -> str | None:
    if sentence is None:
        return None
    for notebook, shell in _SHELL_WORDS:
        sentence = sentence.replace(notebook, shell)
        if _(notebook) != notebook:  # a sentence said in the locale's language (core/i18n.py)
            sentence = sentence.replace(_(notebook), _(shell))
    return sentence


@dataclasses.dataclass(frozen=True)
class ShellSnapshot(ShownSnapshot):
    """A snapshot the command line shows: ``notebooks`` maps a process's PID to the notebook whose kernel it is (or
    runs under), as the Jupyter server told; ``predicted`` says TensorFlow was not imported to name its GPUs."""

    notebooks: Mapping[int, str] = dataclasses.field(default_factory=dict)
    notebook_server: str | None = None
    predicted: bool = True

    def to_text(self) -> str:
        return "\n".join([*text.fit(self.tf_sentence()), *self._settings_lines(), *self._device_lines(),
                          *self._gpu_lines()])

    def devices_text(self) -> str:
        return "\n".join([*text.fit(self.tf_sentence()), *self._device_lines(), *self._gpu_lines()])

    def not_given_sentence(self) -> str | None:
        return said_in_a_shell(super().not_given_sentence())

    def to_dict(self) -> dict:
        """The snapshot's JSON (its shape: docs/reference.md), with two fields the command adds: each GPU's
        ``tf_name_predicted`` (its ``tf_name`` is CUDA's numbering, TensorFlow not imported) and each process's
        ``notebook`` (its path where a Jupyter server attributes the process to a notebook's kernel, else null)."""
        data = super().to_dict()
        for gpu in data["gpus"]:
            gpu["tf_name_predicted"] = self.predicted and gpu["tf_name"] is not None
            for procs in (gpu.get("processes"), *(m.get("processes") for m in gpu.get("mig_devices") or ())):
                for proc in procs if isinstance(procs, list) else ():
                    proc["notebook"] = self.notebooks.get(proc.get("pid"))
        return data

    # -- its sentences ------------------------------------------------------------------------------------------
    def tf_sentence(self) -> str:
        if self.tf_state is TFState.NOT_INSTALLED:
            return text.tf_line(self)
        if self.predicted:
            if not self.tf_gpu_names:
                return _("TensorFlow: {installed}, not imported (`tfgpu devices --tensorflow` lists its devices)"
                         ).format(installed=self._installed())
            return _("TensorFlow: {installed}, not imported; its GPU names (column TensorFlow) are predicted from "
                     "CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER (`tfgpu devices --tensorflow` asks it)").format(
                         installed=self._installed())
        version = f" {self.tf_version}" if self.tf_version else ""
        return _("TensorFlow{version}: imported by this command to list its devices (its runtime not started)").format(
            version=version)

    def _installed(self) -> str:
        from ..core.no_gpu import distribution

        return distribution() or _("installed")

    def _settings_lines(self) -> list[str]:
        lines = text.settings_lines(self)
        return [_(NO_SETTINGS), *lines[1:]] if not self.settings else lines

    def _device_lines(self) -> list[str]:
        return [] if self.predicted else text.device_lines(self)

    def _gpu_lines(self) -> list[str]:
        shown = dataclasses.replace(
            self, nvml=_named_by_notebook(self.nvml, self.notebooks), kernel_gpu_memory=(),
            no_gpu=said_in_a_shell(self.no_gpu), claims={k: said_in_a_shell(v) for k, v in self.claims.items()},
            numbering={**self.numbering, "note": said_in_a_shell(self.numbering.get("note"))})
        kernel_head, command_head = (_(head) for head in _PROCESS_HEADER)
        lines = [line.replace(kernel_head, command_head) for line in text.gpu_lines(shown)]
        if self.notebooks and self.notebook_server:
            lines += text.fit(_("Notebooks: as the Jupyter server at {url} knows its kernels").format(
                url=self.notebook_server))
        return lines


def _named_by_notebook(nvml, notebooks: Mapping[int, str]):
    """NVML's snapshot with each process the server attributes named by its notebook instead of its program."""
    if not notebooks:
        return nvml

    def named(procs):
        if not isinstance(procs, tuple):
            return procs
        return tuple(dataclasses.replace(p, name=notebooks[p.pid]) if p.pid in notebooks else p for p in procs)

    gpus = tuple(dataclasses.replace(gpu, processes=named(gpu.processes), mig_devices=tuple(
        dataclasses.replace(m, processes=named(m.processes)) for m in gpu.mig_devices)) for gpu in nvml.gpus)
    return dataclasses.replace(nvml, gpus=gpus)


__all__ = ["NO_SETTINGS", "ShellSnapshot", "said_in_a_shell"]
