/**
 * MIG devices (a GPU split into instances) as rows under their parent GPU: profile, memory bar and their
 * processes grouped by notebook as a GPU's are. NVML reports neither utilization nor temperature per MIG
 * device: those read "not reported", never 0.
 */

import {
  formatInt,
  formatMiB,
  isNA,
  isNumber,
  memoryBar,
  MemoryBar,
  missingWord,
  NA,
  naReason,
  plainTrans,
  show,
  Shown,
  Trans
} from './format.js';
import type { Words } from './words.js';
import {
  FrontNotebook,
  GpuProcess,
  groupByNotebook,
  hiddenSummary,
  NO_OWNERS,
  NotebookGroup,
  OtherProcessRow,
  Owners
} from './processes.js';

/**
 * A device's processes the server cannot place (a container: NVML's PIDs are the host's, and nothing here names
 * them): not in its `processes`; `text` is the server's sentence ("12,288 MiB held by 2 processes this server cannot
 * attribute: ..."), `used_mib` null where NVML gives no figure.
 */
export interface Unattributed {
  count: number;
  used_mib: number | null;
  text: string;
}

/**
 * The line a GPU or MIG device shows for its unattributed processes: the server's sentence, else (an answer without
 * one) the figures in the sidebar's words; null where there are none. Never a zero: no figure reads as unknown.
 */
export function unattributedLine(value: unknown, trans: Trans = plainTrans, words: Words | null = null): string | null {
  if (typeof value !== 'object' || value === null) {
    return null;
  }
  const { count, used_mib: used, text } = value as Partial<Unattributed>;
  if (typeof text === 'string' && text.trim()) {
    return text.trim();
  }
  if (!isNumber(count) || count <= 0) {
    return null;
  }
  const memory = isNumber(used) ? formatMiB(used, trans) : trans.__('memory %1', missingWord(words, trans));
  return trans._n(
    '%2 held by %1 process this server cannot attribute',
    '%2 held by %1 processes this server cannot attribute',
    count,
    memory
  );
}

export interface MigDeviceInfo {
  uuid: string | NA;
  /** The MIG slot on its parent GPU. */
  index: number | NA;
  name?: string | NA;
  profile?: string | NA | null;
  gpu_instance_id?: number | NA | null;
  compute_instance_id?: number | NA | null;
  memory_total_mib: number | NA | null;
  memory_used_mib: number | NA | null;
  memory_free_mib?: number | NA | null;
  utilization_gpu_pct?: number | NA | null;
  processes: GpuProcess[] | NA;
  hidden_processes?: { count: number; used_mib: number | null | NA } | null;
  kernel_note?: string;
  unattributed?: Unattributed | null;
  [other: string]: unknown;
}

export interface MigRow {
  key: string;
  /** Its key in the document's `history.gpus` (the MIG device's UUID), or null. */
  historyKey: string | null;
  /** "MIG 3g.20gb · slot 0". */
  heading: Shown;
  /** "MIG 3g.20gb" (the shut-down dialog's words for where memory is freed). */
  short: string;
  memory: MemoryBar;
  utilization: Shown;
  notebooks: NotebookGroup[];
  others: OtherProcessRow[];
  processesMissing: string | null;
  missing: string;
  hidden: string | null;
  kernelNote: string;
  /** Its processes the server cannot attribute (a container), as one line; null where there are none. */
  unattributed: string | null;
}

/** "3g.20gb": the server's profile, else the end of the device's name ("... MIG 3g.20gb"). */
function profileOf(device: MigDeviceInfo): string | null {
  if (typeof device.profile === 'string' && device.profile) {
    return device.profile;
  }
  const match = typeof device.name === 'string' ? /MIG\s+(\S+)\s*$/.exec(device.name) : null;
  return match ? match[1] : null;
}

export function migRow(
  device: MigDeviceInfo,
  front: FrontNotebook | null = null,
  trans: Trans = plainTrans,
  owners: Owners = NO_OWNERS,
  words: Words | null = null
): MigRow {
  const profile = profileOf(device);
  const slot = show(device.index, String, trans, undefined, words);
  const short = profile ? trans.__('MIG %1', profile) : trans.__('MIG device');
  const uuid = typeof device.uuid === 'string' ? device.uuid : null;
  const ids = [
    uuid ?? '',
    typeof device.name === 'string' ? device.name : '',
    isNumber(device.gpu_instance_id) && isNumber(device.compute_instance_id)
      ? trans.__('GPU instance %1, compute instance %2', device.gpu_instance_id, device.compute_instance_id)
      : ''
  ];
  let grouped: { notebooks: NotebookGroup[]; others: OtherProcessRow[] } = { notebooks: [], others: [] };
  let processesMissing: string | null = null;
  if (Array.isArray(device.processes)) {
    grouped = groupByNotebook(device.processes, front, trans, owners, words);
  } else if (isNA(device.processes)) {
    processesMissing = naReason(device.processes, trans, words);
  }
  const notReported: Shown = {
    text: trans.__('not reported'),
    title: trans.__('NVML reports no utilization per MIG device'),
    na: true
  };
  const util = device.utilization_gpu_pct;
  return {
    key: `mig-${uuid ?? slot.text}`,
    historyKey: uuid,
    heading: {
      text: trans.__('%1 · slot %2', short, slot.text),
      title: ids.filter(Boolean).join('\n'),
      na: false
    },
    short,
    memory: memoryBar(device.memory_used_mib, device.memory_total_mib, trans, words),
    utilization: isNumber(util)
      ? show(util, v => trans.__('%1%', formatInt(v)), trans, undefined, words)
      : isNA(util)
        ? show(util, String, trans, undefined, words)
        : notReported,
    notebooks: grouped.notebooks,
    others: grouped.others,
    processesMissing,
    missing: missingWord(words, trans),
    hidden: hiddenSummary(device.hidden_processes, trans, words),
    kernelNote: typeof device.kernel_note === 'string' ? device.kernel_note : '',
    unattributed: unattributedLine(device.unattributed, trans, words)
  };
}

/**
 * The line a GPU in MIG mode shows under its heading ("MIG mode · 2 MIG devices"), or null when it is not in
 * MIG mode (false, null: no MIG; an NA: unknown, said in the tooltip only when MIG devices are listed anyway).
 */
export function migLine(mode: unknown, count: number, trans: Trans = plainTrans): string | null {
  if (mode !== true && !(count > 0)) {
    return null;
  }
  if (!count) {
    return trans.__('MIG mode: no MIG device created yet');
  }
  return trans._n('MIG mode · %1 MIG device', 'MIG mode · %1 MIG devices', count);
}
