/**
 * One GPU's (or MIG device's) processes as rows: one row per notebook (kernel) with the memory of all its
 * processes summed, how long that kernel has been idle and whether the sidebar may shut it down; the other
 * processes by name, pid and user, marked where they are another Jupyter server's under the same OS user.
 */

import { readActivity } from './culler.js';
import { formatMiB, formatSpan, isNumber, missingWord, NA, noNameWord, plainTrans, show, Shown, Trans } from './format.js';
import type { Words } from './words.js';

// -- the server's answer: processes ---------------------------------------------------------------------------

export interface SessionInfo {
  path: string;
  name: string;
  type: string;
}

/**
 * What a kernel said of itself where the server cannot match its PID (a container: NVML's PIDs are the host's): its
 * host PID, how the server learned it, and a note where its memory could not be placed ("ambiguous: ...").
 */
export interface KernelReport {
  host_pid: number | null;
  how: string;
  note: string;
}

export interface ProcessKernel {
  id: string;
  name: string;
  execution_state: string;
  relation: 'kernel' | 'child' | string;
  /** How the process was matched to the kernel: "pid" (the host), "host_view" (a host /proc), "handshake". */
  how?: 'pid' | 'host_view' | 'handshake' | string;
  /** The kernel's report, in a container (null or absent on the host). */
  report?: KernelReport | null;
  sessions: SessionInfo[];
  /** Unix seconds of the kernel's last message (null: unknown). */
  last_activity?: number | null;
  /** Seconds idle while `execution_state` is "idle"; null while busy, starting or unknown. */
  idle_s?: number | null;
  /** tfgpu's activity (no cell running, no GPU work), with the server's sentence (culler.ts `KernelActivity`). */
  activity?: unknown;
}

export interface GpuProcess {
  pid: number | NA;
  used_mib: number | null | NA;
  name: string | null | NA;
  user: string | null | NA;
  /** nvidia-smi's Type: "C" compute, "G" graphics, "C+G" both (one process, its memory once); absent: "C". */
  type?: ProcessType | string;
  kernel: ProcessKernel | null;
  /** This server's kernel or its child (or, with `own_processes` "user", any process of the server's OS user). */
  mine?: boolean;
}

export type ProcessType = 'C' | 'G' | 'C+G';

/** A row's tag for processes that are not compute only, as nvidia-smi types them; compute processes have none. */
export interface ProcessTag {
  /** "G" or "C+G"; "" for compute only (no tag). */
  text: string;
  title: string;
}

export const NO_TAG: ProcessTag = { text: '', title: '' };

/**
 * The tag of one process, or of a notebook's processes together (a graphics one and a compute one make "C+G"):
 * "G" where every one is graphics only, "C+G" where compute and graphics meet, none where all are compute.
 * A missing or unknown type counts as compute (the server's document before graphics lists were read).
 */
export function processTag(types: Iterable<unknown>, trans: Trans = plainTrans): ProcessTag {
  let compute = false;
  let graphics = false;
  for (const type of types) {
    if (type === 'G' || type === 'C+G') {
      graphics = true;
    }
    if (type !== 'G') {
      compute = true;
    }
  }
  if (!graphics) {
    return NO_TAG;
  }
  return compute
    ? {
        text: trans.__('C+G'),
        title: trans.__(
          'Compute and graphics: on both of NVML’s process lists (nvidia-smi’s type C+G); its memory is counted once.'
        )
      }
    : {
        text: trans.__('G'),
        title: trans.__(
          'Graphics: on NVML’s graphics process list (nvidia-smi’s type G), as a desktop session or an OpenGL or Vulkan program is.'
        )
      };
}

/** Which processes count as the user's: "user" (the server's OS user's) or "server" (this server's kernels only). */
export type OwnProcesses = 'user' | 'server' | null;

/** What the rows need to know of the document as a whole. */
export interface Owners {
  ownProcesses: OwnProcesses;
  /** The server's OS user where known (the user of its kernels' processes), else null. */
  serverUser: string | null;
}

export const NO_OWNERS: Owners = { ownProcesses: null, serverUser: null };

/** The notebook in front of the user, to mark its row. */
export interface FrontNotebook {
  path?: string | null;
  kernelId?: string | null;
}

// -- rows -------------------------------------------------------------------------------------------------------

/** A kernel the sidebar offers to shut down: what the dialog names it by. */
export interface ShutdownTarget {
  kernelId: string;
  /** The notebook(s) of its sessions; else the kernel's name and the start of its id. */
  name: string;
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
  /**
   * The server's sentence on the kernel's activity ("idle 42 min · holds 12 GiB", "busy on GPU 1 (child pid 4242)"),
   * else from its execution state: "idle 12 min", "busy", "starting", or "" (unknown).
   */
  activity: string;
  activityTitle: string;
  /** tfgpu's state of it: "running", "gpu_busy", "idle", "unknown" ("" from an older server). */
  activityState: string;
  usedMib: number | null;
  memory: Shown;
  isFront: boolean;
  /** "" or the words that mark the notebook in front. */
  mark: string;
  title: string;
  /** Set where the kernel's own process is on the GPU (not only a child of it): the row offers "Shut down". */
  shutdown: ShutdownTarget | null;
  /** "G" or "C+G" where its processes there include graphics ones (nvidia-smi's type), else no tag. */
  tag: ProcessTag;
}

/** A process on a GPU that belongs to no kernel of this server. */
export interface OtherProcessRow {
  key: string;
  name: Shown;
  pid: Shown;
  user: Shown;
  memory: Shown;
  /** "" or a tag: under JupyterHub, a process of the same OS user that is another server's, not this one's. */
  otherServer: string;
  /** "G" or "C+G" for a graphics process (nvidia-smi's type), else no tag. */
  tag: ProcessTag;
  title: string;
}

function preferredSession(sessions: SessionInfo[]): SessionInfo | null {
  return sessions.find(s => s.type === 'notebook') ?? sessions[0] ?? null;
}

function relationWords(relation: string, trans: Trans): string {
  return relation === 'kernel' ? trans.__('the kernel') : trans.__('a child process of the kernel');
}

/**
 * A kernel's activity as a row shows it: the server's sentence where it sends one ("idle 42 min · holds 12 GiB",
 * "busy on GPU 1 (child pid 4242)"), else from its execution state: "idle 12 min", "busy" ... ("" when unknown).
 */
export function kernelActivity(
  kernel: ProcessKernel,
  trans: Trans = plainTrans
): { text: string; title: string; state: string } {
  const last = isNumber(kernel.last_activity) ? new Date(kernel.last_activity * 1000).toLocaleString() : '';
  const lastLine = last ? trans.__('Last activity: %1', last) : '';
  const activity = readActivity(kernel.activity);
  if (activity && activity.text) {
    let why = '';
    if (activity.state === 'gpu_busy') {
      why = trans.__('No cell is running, but the kernel or a process it started works on the GPU: it is not idle.');
    } else if (activity.state === 'running') {
      why = trans.__('The kernel is running a cell.');
    } else if (activity.state === 'idle' && isNumber(activity.idleS)) {
      why = trans.__('No cell has run and the GPU has done no work for it for %1.', formatSpan(activity.idleS, trans));
    }
    return { text: activity.text, title: [why, lastLine].filter(Boolean).join('\n'), state: activity.state };
  }
  return { ...executionActivity(kernel, lastLine, trans), state: '' };
}

/** The activity from jupyter_server's execution state alone (an older server). */
function executionActivity(kernel: ProcessKernel, lastLine: string, trans: Trans): { text: string; title: string } {
  const state = kernel.execution_state;
  switch (state) {
    case 'idle':
      if (isNumber(kernel.idle_s)) {
        return {
          text: trans.__('idle %1', formatSpan(kernel.idle_s, trans)),
          title: [trans.__('The kernel has run nothing for %1.', formatSpan(kernel.idle_s, trans)), lastLine]
            .filter(Boolean)
            .join('\n')
        };
      }
      return { text: trans.__('idle'), title: lastLine };
    case 'busy':
      return { text: trans.__('busy'), title: trans.__('The kernel is running code.') };
    case 'starting':
      return { text: trans.__('starting'), title: '' };
    case 'restarting':
    case 'autorestarting':
      return { text: trans.__('restarting'), title: '' };
    case 'dead':
      return { text: trans.__('dead'), title: trans.__('The kernel has died.') };
    default:
      return { text: '', title: lastLine };
  }
}

/** What the shut-down dialog calls a kernel: its notebooks' paths, else "python3 8c1d0f6e". */
export function kernelCalled(kernel: ProcessKernel, sessions: SessionInfo[], trans: Trans = plainTrans): string {
  if (sessions.length) {
    return sessions.map(s => s.path).join(', ');
  }
  return trans.__('%1 (kernel %2)', kernel.name, String(kernel.id).slice(0, 8));
}

/**
 * Why a process of no kernel of this server is not the user's even though it runs as their OS user: with
 * `own_processes` "server" (JupyterHub, every user's server as one OS user) only this server's kernels and
 * their children are. Other OS users' processes show their user already, so only the same user's are tagged.
 */
function otherServerTag(proc: GpuProcess, user: Shown, owners: Owners, trans: Trans): string {
  if (owners.ownProcesses !== 'server' || proc.mine !== false) {
    return '';
  }
  if (owners.serverUser !== null && (user.na || user.text !== owners.serverUser)) {
    return '';
  }
  return trans.__('not this server’s');
}

/**
 * How a process was matched to its kernel where it was not by its PID (a container): said in the row's tooltip, as
 * the row looks the same either way. "" for "pid" (the host) and anything unknown.
 */
export function matchedHow(how: unknown, trans: Trans = plainTrans): string {
  if (how === 'host_view') {
    return trans.__('Matched through the host /proc.');
  }
  if (how === 'handshake') {
    return trans.__("Matched by the kernel's own report.");
  }
  return '';
}

/** A kernel report's note ("ambiguous: ..."), or "" (none, or the host). */
export function reportNote(kernel: { report?: unknown } | null | undefined): string {
  const report = kernel?.report;
  if (typeof report !== 'object' || report === null) {
    return '';
  }
  const note = (report as KernelReport).note;
  return typeof note === 'string' ? note.trim() : '';
}

/** Group one GPU's processes by kernel (one row per notebook), summing their memory on that GPU. */
export function groupByNotebook(
  processes: GpuProcess[],
  front: FrontNotebook | null = null,
  trans: Trans = plainTrans,
  owners: Owners = NO_OWNERS,
  words: Words | null = null
): { notebooks: NotebookGroup[]; others: OtherProcessRow[] } {
  interface Acc {
    kernel: ProcessKernel;
    used: number;
    unknown: number;
    pids: string[];
    types: unknown[];
    /** How its processes were matched, each once ("pid" says nothing). */
    hows: Set<string>;
    order: number;
    /** Its own process is on this GPU (not only children). */
    ownProcess: boolean;
  }
  const byKernel = new Map<string, Acc>();
  const others: OtherProcessRow[] = [];
  processes.forEach((proc, order) => {
    const kernel = proc && proc.kernel;
    if (kernel && typeof kernel.id === 'string') {
      let acc = byKernel.get(kernel.id);
      if (!acc) {
        acc = { kernel, used: 0, unknown: 0, pids: [], types: [], hows: new Set(), order, ownProcess: false };
        byKernel.set(kernel.id, acc);
      }
      if (isNumber(proc.used_mib)) {
        acc.used += proc.used_mib;
      } else {
        acc.unknown += 1;
      }
      if (kernel.relation === 'kernel') {
        acc.ownProcess = true;
      }
      acc.types.push(proc.type);
      const how = matchedHow(kernel.how, trans);
      if (how) {
        acc.hows.add(how);
      }
      const tag = processTag([proc.type], trans);
      const pid = show(proc.pid, String, trans, undefined, words).text;
      acc.pids.push(
        tag.text
          ? trans.__('pid %1 (%2, %3)', pid, relationWords(kernel.relation, trans), tag.text)
          : trans.__('pid %1 (%2)', pid, relationWords(kernel.relation, trans))
      );
      return;
    }
    if (!proc) {
      return;
    }
    const pid = show(proc.pid, String, trans, undefined, words);
    const name = show(proc.name, String, trans, noNameWord(words, trans), words);
    const user = show(proc.user, String, trans, undefined, words);
    const memory = show(proc.used_mib, v => formatMiB(v, trans), trans, undefined, words);
    const otherServer = otherServerTag(proc, user, owners, trans);
    const tag = processTag([proc.type], trans);
    others.push({
      key: `pid-${pid.text}-${others.length}`,
      name,
      pid,
      user,
      memory,
      otherServer,
      tag,
      title: [
        name.title,
        user.title,
        memory.title,
        tag.title,
        otherServer
          ? trans.__("Not this server's: it runs as the same OS user, but belongs to another Jupyter server (another user's, under JupyterHub).")
          : ''
      ]
        .filter(Boolean)
        .join('; ')
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
      memory = { text: missingWord(words, trans), title: trans.__('NVML gives no memory figure for its processes'), na: true };
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
    const activity = kernelActivity(acc.kernel, trans);
    const note = reportNote(acc.kernel);
    const titleLines = [
      trans.__('Kernel %1 (%2)', acc.kernel.name, acc.kernel.execution_state),
      ...(activity.title ? [activity.title] : []),
      ...acc.pids,
      ...acc.hows,
      ...(note ? [note] : [])
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
      activity: activity.text,
      activityTitle: activity.title,
      activityState: activity.state,
      usedMib,
      memory,
      isFront,
      mark: isFront ? trans.__('this notebook') : '',
      title: titleLines.join('\n'),
      shutdown: acc.ownProcess ? { kernelId: id, name: kernelCalled(acc.kernel, sessions, trans) } : null,
      tag: processTag(acc.types, trans)
    });
  }
  // The biggest users first; equal ones in NVML's order.
  const order = new Map([...byKernel].map(([id, acc]) => [id, acc.order]));
  notebooks.sort((a, b) => (b.usedMib ?? -1) - (a.usedMib ?? -1) || order.get(a.key)! - order.get(b.key)!);
  return { notebooks, others };
}

/** "2 processes of other users, 512 MiB". */
export function hiddenSummary(
  hidden: { count: number; used_mib: number | null | NA } | null | undefined,
  trans: Trans = plainTrans,
  words: Words | null = null
): string | null {
  if (!hidden || !isNumber(hidden.count) || hidden.count <= 0) {
    return null;
  }
  const memory = isNumber(hidden.used_mib) ? formatMiB(hidden.used_mib, trans) : trans.__('memory %1', missingWord(words, trans));
  return trans._n(
    '%1 process of other users, %2',
    '%1 processes of other users, %2',
    hidden.count,
    memory
  );
}

/** The server's OS user, as the document shows it: the user of a process that is one of its kernels. */
export function serverUserOf(gpus: unknown): string | null {
  if (!Array.isArray(gpus)) {
    return null;
  }
  const lists: unknown[] = [];
  for (const gpu of gpus) {
    if (gpu && typeof gpu === 'object') {
      lists.push((gpu as any).processes);
      if (Array.isArray((gpu as any).mig_devices)) {
        lists.push(...(gpu as any).mig_devices.map((m: any) => m && m.processes));
      }
    }
  }
  for (const list of lists) {
    for (const proc of Array.isArray(list) ? (list as GpuProcess[]) : []) {
      if (proc && proc.kernel && proc.kernel.relation === 'kernel' && typeof proc.user === 'string') {
        return proc.user;
      }
    }
  }
  return null;
}
