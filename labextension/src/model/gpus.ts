/**
 * The server's answer (GET tfgpu/api/gpus) as the "All GPUs" section: one row per GPU with its MIG devices,
 * its processes grouped by notebook (processes.ts), what shutting a kernel down frees, and the line shown
 * while the server does not answer.
 */

import {
  formatInt,
  isNA,
  isNumber,
  memoryBar,
  MemoryBar,
  missingWord,
  NA,
  naReason,
  noNameWord,
  plainTrans,
  show,
  Shown,
  Trans
} from './format.js';
import { readWords, Words } from './words.js';
import { MigDeviceInfo, migLine, migRow, MigRow, Unattributed, unattributedLine } from './mig.js';
import {
  FrontNotebook,
  GpuProcess,
  groupByNotebook,
  hiddenSummary,
  kernelCalled,
  NO_OWNERS,
  NotebookGroup,
  OtherProcessRow,
  OwnProcesses,
  Owners,
  ProcessKernel,
  reportNote,
  serverUserOf
} from './processes.js';

// -- the server's answer (GET tfgpu/api/gpus) ------------------------------------------------------------

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
  /** Its processes the server cannot attribute (a container); null on the host or where there are none. */
  unattributed?: Unattributed | null;
  /** true / false, null (no MIG support) or NA. */
  mig_mode?: boolean | null | NA;
  mig_devices?: MigDeviceInfo[];
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
  /** "server": only this server's kernels (and their children) are the user's, not every process of its OS user. */
  own_processes?: OwnProcesses;
  /** The OS user the server runs as (null: unknown). */
  server_user?: string | null;
  /** Whose numbers NVML's PIDs are: comparable false in a container (its own PID namespace), with why in `note`. */
  pids?: PidsInfo;
  /** Present when asked with `?history=SECONDS` (history.ts). */
  history?: unknown;
  [other: string]: unknown;
}

export interface PidsInfo {
  comparable: boolean;
  /** "host", "host_proc" (through a host /proc) or "none". */
  view: string;
  note: string;
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
  /** The data's word for a missing value ("n/a"), for the line that says the processes are missing. */
  missing: string;
  /** "2 processes of other users, 512 MiB", or null. */
  hidden: string | null;
  kernelNote: string;
  /** Its processes the server cannot attribute (a container), as one line; in MIG mode its devices say theirs. */
  unattributed: string | null;
  /** Its key in the document's `history.gpus` (the physical index as a string), or null. */
  historyKey: string | null;
  /** "GPU 1" (the shut-down dialog's words for where memory is freed). */
  short: string;
  /** "MIG mode · 2 MIG devices", or null outside MIG mode. */
  migLine: string | null;
  /** Its MIG devices; in MIG mode the processes are listed under these, not under the GPU. */
  mig: MigRow[];
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
  /** Why PIDs are not matched by number (the server is in a container), said once; "" on the host. */
  pidsNote: string;
  /** Each kernel's own report's note ("notebook.ipynb: ambiguous: ..."), which no process row may carry. */
  kernelReports: KernelReportLine[];
}

export interface KernelReportLine {
  kernelId: string;
  text: string;
}

/** One GPU of the answer as a row. */
export function gpuRow(
  gpu: GpuInfo,
  front: FrontNotebook | null = null,
  trans: Trans = plainTrans,
  owners: Owners = NO_OWNERS,
  words: Words | null = null
): GpuRow {
  const index = show(gpu.index, String, trans, undefined, words);
  const name = show(gpu.name, String, trans, noNameWord(words, trans), words);
  const heading: Shown = {
    text: trans.__('GPU %1 · %2', index.text, name.text),
    title: [index.title, name.title].filter(Boolean).join('; '),
    na: index.na || name.na
  };
  const error = isNA(gpu.error) ? naReason(gpu.error, trans, words) : null;
  const mig = Array.isArray(gpu.mig_devices)
    ? gpu.mig_devices.filter(d => d && typeof d === 'object').map(d => migRow(d, front, trans, owners, words))
    : [];
  // In MIG mode the GPU's processes are its MIG devices' (the union): listed under each device, not twice.
  const processes = mig.length ? [] : gpu.processes;
  let grouped: { notebooks: NotebookGroup[]; others: OtherProcessRow[] } = { notebooks: [], others: [] };
  let processesMissing: string | null = null;
  if (Array.isArray(processes)) {
    grouped = groupByNotebook(processes, front, trans, owners, words);
  } else if (isNA(processes)) {
    processesMissing = naReason(processes, trans, words);
  } else if (processes !== undefined && processes !== null) {
    processesMissing = trans.__('unexpected value from the server');
  }
  return {
    key: `gpu-${index.text}`,
    heading,
    error,
    memory: memoryBar(gpu.memory_used_mib, gpu.memory_total_mib, trans, words),
    utilization: show(gpu.utilization_gpu_pct, v => trans.__('%1%', formatInt(v)), trans, undefined, words),
    temperature: show(gpu.temperature_c, v => trans.__('%1 °C', formatInt(v)), trans, undefined, words),
    notebooks: grouped.notebooks,
    others: grouped.others,
    processesMissing,
    missing: missingWord(words, trans),
    // In MIG mode these describe the union of the devices' processes: each device says its own part.
    hidden: mig.length ? null : hiddenSummary(gpu.hidden_processes, trans, words),
    kernelNote: !mig.length && typeof gpu.kernel_note === 'string' ? gpu.kernel_note : '',
    unattributed: mig.length ? null : unattributedLine(gpu.unattributed, trans, words),
    historyKey: index.na ? null : index.text,
    short: trans.__('GPU %1', index.text),
    migLine: migLine(gpu.mig_mode, mig.length, trans),
    mig
  };
}

/**
 * The answer with every process's `kernel` filled in from the answer's `kernels`: the server sends each kernel's
 * name, state, idle time and sessions once (a row says only `{id, relation}`), however many processes it has.
 * A row that already carries them (an older server) keeps its own.
 */
export function withKernels(answer: GpusAnswer): GpusAnswer {
  const kernels = new Map<string, Record<string, unknown>>();
  for (const kernel of Array.isArray(answer.kernels) ? answer.kernels : []) {
    if (kernel && typeof kernel === 'object' && typeof (kernel as any).id === 'string') {
      kernels.set((kernel as any).id, kernel as Record<string, unknown>);
    }
  }
  const join = (processes: unknown): unknown =>
    Array.isArray(processes)
      ? processes.map(proc =>
          proc && typeof proc === 'object' && proc.kernel && typeof proc.kernel.id === 'string'
            ? { ...proc, kernel: { sessions: [], ...(kernels.get(proc.kernel.id) ?? {}), ...proc.kernel } }
            : proc
        )
      : processes;
  const gpus = Array.isArray(answer.gpus)
    ? answer.gpus.map(gpu =>
        gpu && typeof gpu === 'object'
          ? {
              ...gpu,
              processes: join(gpu.processes) as GpuInfo['processes'],
              mig_devices: Array.isArray(gpu.mig_devices)
                ? gpu.mig_devices.map(mig => (mig && typeof mig === 'object' ? { ...mig, processes: join(mig.processes) } : mig)) as GpuInfo['mig_devices']
                : gpu.mig_devices
            }
          : gpu
      )
    : answer.gpus;
  return { ...answer, gpus };
}

/** The whole "All GPUs" section from the server's answer. */
export function serverView(data: unknown, front: FrontNotebook | null = null, trans: Trans = plainTrans): ServerView {
  const answer = typeof data === 'object' && data !== null ? withKernels(data as GpusAnswer) : (data as GpusAnswer);
  const view: ServerView = {
    problem: null,
    driver: '',
    gpus: [],
    empty: null,
    kernelNote: '',
    stale: null,
    pidsNote: '',
    kernelReports: []
  };
  // The server's words for missing values (null from an older server: each key reads as itself).
  const words = typeof data === 'object' && data !== null ? readWords(answer.words) : null;
  if (typeof data !== 'object' || data === null || typeof answer.nvml !== 'object' || answer.nvml === null) {
    view.problem = trans.__('The server gave an answer the sidebar does not understand.');
    return view;
  }
  view.kernelNote = typeof answer.kernel_note === 'string' ? answer.kernel_note : '';
  view.stale = staleLine(answer.stale, trans);
  view.pidsNote = pidsNote(answer.pids);
  view.kernelReports = kernelReportLines(answer.kernels, trans);
  const nvml = answer.nvml;
  if (!nvml.available || isNA(nvml.error)) {
    const reason = isNA(nvml.error) ? naReason(nvml.error, trans, words) : trans.__('NVML is not available on this server');
    view.problem = trans.__('No GPU figures: %1', reason);
    return view;
  }
  const driver = show(nvml.driver_version, String, trans, undefined, words);
  const cuda = show(nvml.cuda_driver_version, String, trans, undefined, words);
  view.driver = trans.__('Driver %1 · CUDA %2', driver.text, cuda.text);
  if (!Array.isArray(answer.gpus)) {
    view.problem = trans.__('The server gave an answer the sidebar does not understand.');
    return view;
  }
  const owners: Owners = {
    ownProcesses: answer.own_processes === 'server' || answer.own_processes === 'user' ? answer.own_processes : null,
    serverUser: typeof answer.server_user === 'string' ? answer.server_user : serverUserOf(answer.gpus)
  };
  view.gpus = answer.gpus.map(gpu => gpuRow(gpu, front, trans, owners, words));
  if (!view.gpus.length) {
    view.empty = trans.__('NVML sees no GPU on this server.');
  }
  return view;
}

/**
 * The server's note on PIDs where they are not its own (a container), as a sentence (the server writes it as a clause
 * for its other views), else "" (the host, or an older server).
 */
export function pidsNote(pids: unknown): string {
  if (typeof pids !== 'object' || pids === null || (pids as PidsInfo).comparable !== false) {
    return '';
  }
  const note = (pids as PidsInfo).note;
  const text = typeof note === 'string' ? note.trim() : '';
  if (!text) {
    return '';
  }
  return text.charAt(0).toUpperCase() + text.slice(1) + (/[.!?]$/.test(text) ? '' : '.');
}

/** "analysis.ipynb: ambiguous: 2 processes appeared on GPU 0 ..." for each kernel whose report has a note. */
export function kernelReportLines(kernels: unknown, trans: Trans = plainTrans): KernelReportLine[] {
  const lines: KernelReportLine[] = [];
  for (const kernel of Array.isArray(kernels) ? kernels : []) {
    if (!kernel || typeof kernel !== 'object' || typeof kernel.id !== 'string') {
      continue;
    }
    const note = reportNote(kernel);
    if (note) {
      const sessions = Array.isArray(kernel.sessions) ? kernel.sessions : [];
      const called = kernelCalled(kernel as ProcessKernel, sessions, trans);
      lines.push({ kernelId: kernel.id, text: trans.__('%1: %2', called, note) });
    }
  }
  return lines;
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

/** What shutting a kernel down frees, for its dialog. */
export interface ShutdownPlan {
  kernelId: string;
  /** The notebook (its session's path), else the kernel's name and the start of its id. */
  name: string;
  /** "4,096 MiB on GPU 1, 1,000 MiB on GPU 0 (MIG 3g.20gb)". */
  frees: string;
}

/** The GPU memory a kernel holds across the view (every GPU and MIG device), or null when it holds none here. */
export function shutdownPlan(view: ServerView | null, kernelId: string, trans: Trans = plainTrans): ShutdownPlan | null {
  let name: string | null = null;
  const parts: string[] = [];
  const add = (groups: NotebookGroup[], where: string) => {
    for (const group of groups) {
      if (group.kernelId !== kernelId) {
        continue;
      }
      name = name ?? group.shutdown?.name ?? group.label;
      parts.push(
        group.usedMib === null
          ? trans.__('an unknown amount on %1', where)
          : trans.__('%1 on %2', group.memory.text, where)
      );
    }
  };
  for (const gpu of view?.gpus ?? []) {
    add(gpu.notebooks, gpu.short);
    for (const mig of gpu.mig) {
      add(mig.notebooks, trans.__('%1 (%2)', gpu.short, mig.short));
    }
  }
  return name === null ? null : { kernelId, name, frees: parts.join(', ') };
}

/** The line shown while requests fail, and whether reloading the page is the way out (its button). */
export interface ServerTrouble {
  text: string;
  reload: boolean;
}

/**
 * The line shown while the server does not answer (the last figures stay on screen under it).
 * `status` is the HTTP status of the failed request, or null when no answer came at all. A 403 is a page
 * whose session ended (JupyterHub stopped and started the user's server: its cookie is gone): retrying
 * cannot fix that, reloading the page signs in again.
 */
export function serverTrouble(status: number | null, trans: Trans = plainTrans): ServerTrouble {
  if (status === null || status === 0) {
    return { text: trans.__('Server not answering; retrying…'), reload: false };
  }
  if (status === 404) {
    return {
      text: trans.__('Server not answering (404: is the tfgpu_magic server extension enabled?); retrying…'),
      reload: false
    };
  }
  if (status === 403) {
    return {
      text: trans.__("This page's session with the server has ended (403). Reload the page to sign in again."),
      reload: true
    };
  }
  return { text: trans.__('Server not answering (HTTP %1); retrying…', status), reload: false };
}

/** serverTrouble's text alone. */
export function serverProblem(status: number | null, trans: Trans = plainTrans): string {
  return serverTrouble(status, trans).text;
}
