/**
 * Kernels that died holding GPU memory (the server's answer's `dead_kernels`, server/deaths.py): which notebook,
 * when, what it held and the likely cause, as one line each at the top of the sidebar, less those dismissed in this
 * browser. Pure: the lines' DOM and the dismiss button are deaths.ts's.
 */

import { DismissedReleases, KeyStore } from './culler.js';
import { formatInt, formatMiB, isNumber, plainTrans, Trans } from './format.js';

/** One kernel that died while it held GPU memory. */
export interface KernelDeath {
  kernelId: string;
  /** The notebook's path (null: a console, or a kernel with no session). */
  notebook: string | null;
  pid: number | null;
  /** Unix seconds, when the server noticed the death (within a few seconds of it). */
  diedAt: number;
  /** The signal that ended it (9: SIGKILL), or null where it exited. */
  signal: number | null;
  signalName: string | null;
  exitCode: number | null;
  /** The server's sentence: "killed by SIGKILL: most often the system's out-of-memory killer (host memory), ...". */
  cause: string;
  /** The GPU memory it held in the last answer before it died, exact (null: not said). */
  heldBytes: number | null;
  gpus: number[];
  /** Unix seconds of that answer (null: not said). */
  heldAt: number | null;
  /** jupyter_server restarted it (same kernel id, a new process: the variables are gone). */
  restarted: boolean;
}

function record(value: unknown): Record<string, unknown> | null {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : null;
}

function numberOrNull(value: unknown): number | null {
  return isNumber(value) ? value : null;
}

/** The answer's `dead_kernels` (an older server: none). Entries without a kernel id or a time are left out. */
export function readDeaths(value: unknown): KernelDeath[] {
  const deaths: KernelDeath[] = [];
  for (const item of Array.isArray(value) ? value : []) {
    const entry = record(item);
    if (!entry || typeof entry.kernel_id !== 'string' || !entry.kernel_id || !isNumber(entry.died_at)) {
      continue;
    }
    deaths.push({
      kernelId: entry.kernel_id,
      notebook: typeof entry.notebook === 'string' && entry.notebook ? entry.notebook : null,
      pid: numberOrNull(entry.pid),
      diedAt: entry.died_at,
      signal: numberOrNull(entry.signal),
      signalName: typeof entry.signal_name === 'string' && entry.signal_name ? entry.signal_name : null,
      exitCode: numberOrNull(entry.exit_code),
      cause: typeof entry.cause === 'string' ? entry.cause.trim() : '',
      heldBytes: numberOrNull(entry.last_held_bytes),
      gpus: Array.isArray(entry.gpus) ? entry.gpus.filter(isNumber) : [],
      heldAt: numberOrNull(entry.held_at),
      restarted: entry.restarted === true
    });
  }
  return deaths;
}

/** The localStorage key of the dismissed death lines. */
export const DEATHS_DISMISSED_KEY = 'tfgpu_magic:kernel-deaths-dismissed';

/** The most death lines the sidebar shows (the server keeps 10). */
export const DEATHS_SHOWN = 3;

/** The death lines this browser dismissed (localStorage), so a page load keeps them hidden. */
export class DismissedDeaths {
  constructor(store: KeyStore | null, key = DEATHS_DISMISSED_KEY) {
    this._dismissed = new DismissedReleases(store, key);
  }

  has(death: KernelDeath): boolean {
    return this._dismissed.has({ kernelId: death.kernelId, at: death.diedAt });
  }

  dismiss(death: KernelDeath): void {
    this._dismissed.dismiss({ kernelId: death.kernelId, at: death.diedAt });
  }

  private _dismissed: DismissedReleases;
}

/** The deaths to show: the most recent first, at most `DEATHS_SHOWN`, less those dismissed here. */
export function deathLines(deaths: KernelDeath[], dismissed: DismissedDeaths): KernelDeath[] {
  return deaths
    .filter(death => !dismissed.has(death))
    .sort((a, b) => b.diedAt - a.diedAt)
    .slice(0, DEATHS_SHOWN);
}

const GIB = 1024 ** 3;
const MIB = 1024 ** 2;
const pad2 = (n: number) => String(n).padStart(2, '0');

/** Exact bytes for people: "12.0 GiB" from 1 GiB up (as the server's own sentences say it), else "512 MiB". */
export function formatBytes(bytes: number, trans: Trans = plainTrans): string {
  if (bytes >= GIB) {
    return trans.__('%1 GiB', (bytes / GIB).toFixed(1));
  }
  return formatMiB(Math.round((bytes / MIB) * 10) / 10, trans);
}

/** When it died, on the browser's clock: "14:02" that day, "2026-12-03 14:02" on another day than `now`'s. */
export function deathTime(diedAt: number, now: number = Date.now() / 1000): string {
  const d = new Date(diedAt * 1000);
  const clock = `${pad2(d.getHours())}:${pad2(d.getMinutes())}`;
  const today = new Date(now * 1000);
  const sameDay =
    d.getFullYear() === today.getFullYear() && d.getMonth() === today.getMonth() && d.getDate() === today.getDate();
  return sameDay ? clock : `${d.getFullYear()}-${pad2(d.getMonth() + 1)}-${pad2(d.getDate())} ${clock}`;
}

/** The notebook's file name (the path is in the line's tooltip), or null. */
function fileName(death: KernelDeath): string | null {
  return death.notebook ? death.notebook.split('/').pop() || death.notebook : null;
}

/**
 * The sidebar's line: "train.ipynb's kernel died at 14:02 holding 12.0 GiB on GPU 1. Killed by SIGKILL: most often
 * the system's out-of-memory killer (host memory), or someone ended it. It was restarted: its variables are gone."
 */
export function deathLine(death: KernelDeath, trans: Trans = plainTrans, now?: number): string {
  const name = fileName(death);
  const when = deathTime(death.diedAt, now);
  const held = death.heldBytes !== null ? formatBytes(death.heldBytes, trans) : null;
  const where = death.gpus.map(i => trans.__('GPU %1', i)).join(', ');
  let head: string;
  if (held !== null && where) {
    head = name
      ? trans.__("%1's kernel died at %2 holding %3 on %4.", name, when, held, where)
      : trans.__('Kernel %1 died at %2 holding %3 on %4.', death.kernelId.slice(0, 8), when, held, where);
  } else {
    head = name
      ? trans.__("%1's kernel died at %2 holding GPU memory.", name, when)
      : trans.__('Kernel %1 died at %2 holding GPU memory.', death.kernelId.slice(0, 8), when);
  }
  const cause = death.cause ? death.cause.charAt(0).toUpperCase() + death.cause.slice(1) + '.' : '';
  const after = death.restarted
    ? trans.__('It was restarted: its variables are gone.')
    : trans.__('It was not restarted.');
  return [head, cause, after].filter(Boolean).join(' ');
}

/** The line's tooltip: the notebook's path, the process, how it ended, the exact bytes and when they were seen. */
export function deathTitle(death: KernelDeath, trans: Trans = plainTrans): string {
  const parts: string[] = [];
  parts.push(death.notebook ?? trans.__('kernel %1', death.kernelId));
  if (death.pid !== null) {
    parts.push(trans.__('process %1', death.pid));
  }
  if (death.signal !== null) {
    parts.push(trans.__('ended by signal %1 (%2)', death.signal, death.signalName ?? '?'));
  } else if (death.exitCode !== null) {
    parts.push(trans.__('exit code %1', death.exitCode));
  }
  if (death.heldBytes !== null) {
    parts.push(trans.__('held %1 bytes', formatInt(death.heldBytes)));
  }
  return parts.join(' · ');
}
