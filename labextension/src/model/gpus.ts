/**
 * The server's answer (GET tfgpu/api/gpus) as the "All GPUs" section: one row per GPU, its processes
 * grouped by notebook, the summary of hidden processes, and the line shown while the server does not answer.
 */

import { formatInt, formatMiB, isNA, isNumber, NA, naReason, plainTrans, show, Shown, Trans } from './format.js';

// -- the server's answer (GET tfgpu/api/gpus) ------------------------------------------------------------

export interface SessionInfo {
  path: string;
  name: string;
  type: string;
}

export interface ProcessKernel {
  id: string;
  name: string;
  execution_state: string;
  relation: 'kernel' | 'child' | string;
  sessions: SessionInfo[];
}

export interface GpuProcess {
  pid: number | NA;
  used_mib: number | null | NA;
  name: string | null | NA;
  user: string | null | NA;
  kernel: ProcessKernel | null;
}

export interface GpuInfo {
  index: number | NA;
  name: string | NA;
  memory_total_mib: number | NA;
  memory_used_mib: number | NA;
  utilization_gpu_pct: number | NA;
  temperature_c: number | NA;
  error: NA | null;
  processes: GpuProcess[] | NA;
  hidden_processes: { count: number; used_mib: number | null | NA } | null;
  kernel_note: string;
  [other: string]: unknown;
}

export interface GpusAnswer {
  schema?: number;
  taken_at?: number;
  nvml: {
    available: boolean;
    error: NA | null;
    driver_version?: string | NA | null;
    cuda_driver_version?: string | NA | null;
  };
  gpus: GpuInfo[];
  kernels?: unknown[];
  kernel_note?: string;
  /** Set when the driver has not answered in time: the figures are the last ones, `age_s` seconds old. */
  stale?: { age_s: number | null; reason: string } | null;
  [other: string]: unknown;
}

/** The notebook in front of the user, to mark its row. */
export interface FrontNotebook {
  path?: string | null;
  kernelId?: string | null;
}

/** A GPU's memory as a bar: text "30,000 / 40,960 MiB (73%)", and the filled fraction (null: no bar). */
export interface MemoryBar {
  text: string;
  title: string;
  fraction: number | null;
  percent: number | null;
  na: boolean;
}

/** One notebook (one kernel) using a GPU, with the memory of all its processes on that GPU. */
export interface NotebookGroup {
  key: string;
  label: string;
  /** The notebook to open on a click; null when the kernel has no notebook (a console, a bare kernel). */
  openPath: string | null;
  kernelId: string;
  kernelName: string;
  executionState: string;
  usedMib: number | null;
  memory: Shown;
  isFront: boolean;
  /** "" or the words that mark the notebook in front. */
  mark: string;
  title: string;
}

/** A process on a GPU that belongs to no kernel of this server. */
export interface OtherProcessRow {
  key: string;
  name: Shown;
  pid: Shown;
  user: Shown;
  memory: Shown;
  title: string;
}

export interface GpuRow {
  key: string;
  heading: Shown;
  /** Why the whole GPU could not be read; the row then shows this instead of figures. */
  error: string | null;
  memory: MemoryBar;
  utilization: Shown;
  temperature: Shown;
  notebooks: NotebookGroup[];
  others: OtherProcessRow[];
  /** Why there is no process list (NVML gave none), or null. */
  processesMissing: string | null;
  /** "2 processes of other users, 512 MiB", or null. */
  hidden: string | null;
  kernelNote: string;
}

export interface ServerView {
  /** Why there are no GPU figures at all (NVML missing or failing, an unexpected answer), or null. */
  problem: string | null;
  /** "Driver 550.54.15 · CUDA 12.4", or "". */
  driver: string;
  gpus: GpuRow[];
  /** Set when NVML works but lists no GPU. */
  empty: string | null;
  kernelNote: string;
  /** Set when the figures are old: the driver has not answered (a slow or hung driver), and for how long. */
  stale: string | null;
}

function memoryBar(gpu: GpuInfo, trans: Trans): MemoryBar {
  const used = gpu.memory_used_mib;
  const total = gpu.memory_total_mib;
  if (isNumber(used) && isNumber(total)) {
    const fraction = total > 0 ? Math.min(1, Math.max(0, used / total)) : null;
    const percent = fraction === null ? null : Math.round(fraction * 100);
    const text =
      percent === null
        ? trans.__('%1 / %2 MiB', formatInt(used), formatInt(total))
        : trans.__('%1 / %2 MiB (%3%)', formatInt(used), formatInt(total), percent);
    return { text, title: '', fraction, percent, na: false };
  }
  const u = show(used, formatInt, trans);
  const t = show(total, formatInt, trans);
  if (u.na && t.na && u.title === t.title) {
    return { text: u.text, title: u.title, fraction: null, percent: null, na: true };
  }
  return {
    text: trans.__('%1 / %2 MiB', u.text, t.text),
    title: [u.title, t.title].filter(Boolean).join('; '),
    fraction: null,
    percent: null,
    na: true
  };
}

function preferredSession(sessions: SessionInfo[]): SessionInfo | null {
  return sessions.find(s => s.type === 'notebook') ?? sessions[0] ?? null;
}

function relationWords(relation: string, trans: Trans): string {
  return relation === 'kernel' ? trans.__('the kernel') : trans.__('a child process of the kernel');
}

/** Group one GPU's processes by kernel (one row per notebook), summing their memory on that GPU. */
export function groupByNotebook(
  processes: GpuProcess[],
  front: FrontNotebook | null = null,
  trans: Trans = plainTrans
): { notebooks: NotebookGroup[]; others: OtherProcessRow[] } {
  interface Acc {
    kernel: ProcessKernel;
    used: number;
    unknown: number;
    pids: string[];
    order: number;
  }
  const byKernel = new Map<string, Acc>();
  const others: OtherProcessRow[] = [];
  processes.forEach((proc, order) => {
    const kernel = proc && proc.kernel;
    if (kernel && typeof kernel.id === 'string') {
      let acc = byKernel.get(kernel.id);
      if (!acc) {
        acc = { kernel, used: 0, unknown: 0, pids: [], order };
        byKernel.set(kernel.id, acc);
      }
      if (isNumber(proc.used_mib)) {
        acc.used += proc.used_mib;
      } else {
        acc.unknown += 1;
      }
      acc.pids.push(
        trans.__('pid %1 (%2)', show(proc.pid, String, trans).text, relationWords(kernel.relation, trans))
      );
      return;
    }
    if (!proc) {
      return;
    }
    const pid = show(proc.pid, String, trans);
    const name = show(proc.name, String, trans, trans.__('unknown process'));
    const user = show(proc.user, String, trans, trans.__('unknown user'));
    const memory = show(proc.used_mib, v => formatMiB(v, trans), trans, trans.__('unknown'));
    others.push({
      key: `pid-${pid.text}-${others.length}`,
      name,
      pid,
      user,
      memory,
      title: [name.title, user.title, memory.title].filter(Boolean).join('; ')
    });
  });

  const notebooks: NotebookGroup[] = [];
  for (const [id, acc] of byKernel) {
    const sessions = Array.isArray(acc.kernel.sessions) ? acc.kernel.sessions : [];
    const preferred = preferredSession(sessions);
    const label = sessions.length ? sessions.map(s => s.path).join(', ') : acc.kernel.name;
    const known = acc.pids.length - acc.unknown;
    let memory: Shown;
    let usedMib: number | null;
    if (known === 0) {
      usedMib = null;
      memory = { text: trans.__('unknown'), title: trans.__('NVML gives no memory figure for its processes'), na: true };
    } else if (acc.unknown > 0) {
      usedMib = acc.used;
      memory = {
        text: trans.__('at least %1', formatMiB(acc.used, trans)),
        title: trans._n(
          '%1 of its processes has no memory figure',
          '%1 of its processes have no memory figure',
          acc.unknown
        ),
        na: false
      };
    } else {
      usedMib = acc.used;
      memory = { text: formatMiB(acc.used, trans), title: '', na: false };
    }
    const isFront =
      front !== null &&
      ((!!front.kernelId && front.kernelId === id) ||
        (!!front.path && sessions.some(s => s.path === front.path)));
    const titleLines = [
      trans.__('Kernel %1 (%2)', acc.kernel.name, acc.kernel.execution_state),
      ...acc.pids
    ];
    if (!sessions.length) {
      titleLines.push(trans.__('This kernel has no notebook or console open.'));
    }
    notebooks.push({
      key: id,
      label,
      openPath: preferred && preferred.type === 'notebook' ? preferred.path : null,
      kernelId: id,
      kernelName: acc.kernel.name,
      executionState: acc.kernel.execution_state,
      usedMib,
      memory,
      isFront,
      mark: isFront ? trans.__('this notebook') : '',
      title: titleLines.join('\n')
    });
  }
  // The biggest users first; equal ones in NVML's order.
  const order = new Map([...byKernel].map(([id, acc]) => [id, acc.order]));
  notebooks.sort((a, b) => (b.usedMib ?? -1) - (a.usedMib ?? -1) || order.get(a.key)! - order.get(b.key)!);
  return { notebooks, others };
}

/** "2 processes of other users, 512 MiB". */
export function hiddenSummary(
  hidden: GpuInfo['hidden_processes'],
  trans: Trans = plainTrans
): string | null {
  if (!hidden || !isNumber(hidden.count) || hidden.count <= 0) {
    return null;
  }
  const memory = isNumber(hidden.used_mib) ? formatMiB(hidden.used_mib, trans) : trans.__('memory unknown');
  return trans._n(
    '%1 process of other users, %2',
    '%1 processes of other users, %2',
    hidden.count,
    memory
  );
}

/** One GPU of the answer as a row. */
export function gpuRow(gpu: GpuInfo, front: FrontNotebook | null = null, trans: Trans = plainTrans): GpuRow {
  const index = show(gpu.index, String, trans);
  const name = show(gpu.name, String, trans);
  const heading: Shown = {
    text: trans.__('GPU %1 · %2', index.text, name.text),
    title: [index.title, name.title].filter(Boolean).join('; '),
    na: index.na || name.na
  };
  const error = isNA(gpu.error) ? naReason(gpu.error, trans) : null;
  const processes = gpu.processes;
  let grouped: { notebooks: NotebookGroup[]; others: OtherProcessRow[] } = { notebooks: [], others: [] };
  let processesMissing: string | null = null;
  if (Array.isArray(processes)) {
    grouped = groupByNotebook(processes, front, trans);
  } else if (isNA(processes)) {
    processesMissing = naReason(processes, trans);
  } else if (processes !== undefined && processes !== null) {
    processesMissing = trans.__('unexpected value from the server');
  }
  return {
    key: `gpu-${index.text}`,
    heading,
    error,
    memory: memoryBar(gpu, trans),
    utilization: show(gpu.utilization_gpu_pct, v => trans.__('%1%', formatInt(v)), trans),
    temperature: show(gpu.temperature_c, v => trans.__('%1 °C', formatInt(v)), trans),
    notebooks: grouped.notebooks,
    others: grouped.others,
    processesMissing,
    hidden: hiddenSummary(gpu.hidden_processes, trans),
    kernelNote: typeof gpu.kernel_note === 'string' ? gpu.kernel_note : ''
  };
}

/** The whole "All GPUs" section from the server's answer. */
export function serverView(data: unknown, front: FrontNotebook | null = null, trans: Trans = plainTrans): ServerView {
  const answer = data as GpusAnswer;
  const view: ServerView = { problem: null, driver: '', gpus: [], empty: null, kernelNote: '', stale: null };
  if (typeof data !== 'object' || data === null || typeof answer.nvml !== 'object' || answer.nvml === null) {
    view.problem = trans.__('The server gave an answer the sidebar does not understand.');
    return view;
  }
  view.kernelNote = typeof answer.kernel_note === 'string' ? answer.kernel_note : '';
  view.stale = staleLine(answer.stale, trans);
  const nvml = answer.nvml;
  if (!nvml.available || isNA(nvml.error)) {
    const reason = isNA(nvml.error) ? naReason(nvml.error, trans) : trans.__('NVML is not available on this server');
    view.problem = trans.__('No GPU figures: %1', reason);
    return view;
  }
  const driver = show(nvml.driver_version, String, trans);
  const cuda = show(nvml.cuda_driver_version, String, trans);
  view.driver = trans.__('Driver %1 · CUDA %2', driver.text, cuda.text);
  if (!Array.isArray(answer.gpus)) {
    view.problem = trans.__('The server gave an answer the sidebar does not understand.');
    return view;
  }
  view.gpus = answer.gpus.map(gpu => gpuRow(gpu, front, trans));
  if (!view.gpus.length) {
    view.empty = trans.__('NVML sees no GPU on this server.');
  }
  return view;
}

/** "Figures from 23 s ago: the driver has not answered for 25 s" (null: the figures are current). */
export function staleLine(stale: unknown, trans: Trans = plainTrans): string | null {
  if (typeof stale !== 'object' || stale === null) {
    return null;
  }
  const { age_s: age, reason } = stale as { age_s?: unknown; reason?: unknown };
  const why = typeof reason === 'string' && reason ? reason : trans.__('the driver has not answered');
  return isNumber(age)
    ? trans.__('Figures from %1 s ago: %2', Math.round(age), why)
    : trans.__('No figures yet: %1', why);
}

/**
 * The line shown while the server does not answer (the last figures stay on screen under it).
 * `status` is the HTTP status of the failed request, or null when no answer came at all.
 */
export function serverProblem(status: number | null, trans: Trans = plainTrans): string {
  if (status === null || status === 0) {
    return trans.__('Server not answering; retrying…');
  }
  if (status === 404) {
    return trans.__(
      'Server not answering (404: is the tfgpu_magic server extension enabled?); retrying…'
    );
  }
  if (status === 403) {
    return trans.__('Server refused the request (403: logged out?); retrying…');
  }
  return trans.__('Server not answering (HTTP %1); retrying…', status);
}
