/**
 * The status-bar item: the GPU memory the front notebook's kernel holds and where ("GPU 1 · 6.0 GiB"), from the
 * server's answer in the page's one feed (the sidebar reads the same; no request of its own). Null where it holds
 * none, or there is no current answer: the item hides.
 */

import { formatMiB, isNumber, missingWord, plainTrans, Trans } from './format.js';
import { GpusAnswer, withKernels } from './gpus.js';
import { readWords } from './words.js';

export interface StatusBarView {
  /** "GPU 1 · 6.0 GiB", "GPUs 1, 3 · 8.0 GiB", "GPU 3/0 · 1,000 MiB" (a MIG device: parent/slot). */
  text: string;
  /** One line per device, and what a click does. */
  title: string;
}

/** MiB as the status bar says it: GiB from 1 GiB up, one decimal; MiB below. */
export function statusMemory(mib: number, trans: Trans = plainTrans): string {
  return mib >= 1024 ? trans.__('%1 GiB', (mib / 1024).toFixed(1)) : formatMiB(mib, trans);
}

function heldOn(processes: unknown, kernelId: string): number {
  let total = 0;
  for (const proc of Array.isArray(processes) ? processes : []) {
    if (proc && proc.kernel && proc.kernel.id === kernelId && isNumber(proc.used_mib)) {
      total += proc.used_mib;
    }
  }
  return total;
}

export function statusBarView(data: unknown, kernelId: string | null, trans: Trans = plainTrans): StatusBarView | null {
  if (!kernelId || typeof data !== 'object' || data === null) {
    return null;
  }
  const answer = withKernels(data as GpusAnswer);
  if (!answer.nvml || !answer.nvml.available || !Array.isArray(answer.gpus)) {
    return null;
  }
  const missing = missingWord(readWords((data as { words?: unknown }).words), trans);
  const held: [string, number][] = [];
  for (const gpu of answer.gpus) {
    if (!gpu || !isNumber(gpu.index)) {
      continue;
    }
    const migs = Array.isArray(gpu.mig_devices) ? gpu.mig_devices : [];
    if (migs.length) {
      // In MIG mode the GPU's list is its devices' again: counted once, per device.
      for (const mig of migs) {
        const mib = heldOn(mig && mig.processes, kernelId);
        if (mib > 0) {
          held.push([`${gpu.index}/${isNumber(mig.index) ? mig.index : missing}`, mib]);
        }
      }
    } else {
      const mib = heldOn(gpu.processes, kernelId);
      if (mib > 0) {
        held.push([String(gpu.index), mib]);
      }
    }
  }
  if (!held.length) {
    return null;
  }
  const total = held.reduce((sum, [, mib]) => sum + mib, 0);
  const where =
    held.length === 1 ? trans.__('GPU %1', held[0][0]) : trans.__('GPUs %1', held.map(([name]) => name).join(', '));
  const lines = held.map(([name, mib]) => trans.__('GPU %1: %2', name, formatMiB(mib, trans)));
  return {
    text: `${where} · ${statusMemory(total, trans)}`,
    title: [trans.__("GPU memory this notebook's kernel holds"), ...lines, trans.__('Click to show the GPUs sidebar.')].join(
      '\n'
    )
  };
}
