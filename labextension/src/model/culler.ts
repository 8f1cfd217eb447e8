/**
 * The GPU-aware idle culler as the page sees it (the server's answer's `culler` and `all_idle`, each kernel's
 * `activity`): which kernels are warned that they will be shut down, which were shut down (`released`), how
 * often the feed asks while everything is idle, and which warnings' notifications to open, update and close.
 * Pure: the notifications, the sidebar's lines and the POST to `keep` are the views' (culler.ts, widget.ts).
 */

import { isNumber, plainTrans, Trans } from './format.js';

// -- the server's answer -----------------------------------------------------------------------------------------

/** A kernel's activity by tfgpu's definition (no cell running, no GPU work), with the server's sentence. */
export interface KernelActivity {
  state: 'running' | 'gpu_busy' | 'idle' | 'unknown' | string;
  /** Seconds idle (null: not idle, or unknown). */
  idleS: number | null;
  /** What to show under the notebook: "idle 42 min · holds 12 GiB", "busy on GPU 1 (child pid 4242)". */
  text: string;
  gpu: number | null;
  pid: number | null;
  child: boolean;
}

/** A kernel the culler will shut down unless it is kept (or gets busy again). */
export interface CullWarning {
  kernelId: string;
  notebook: string | null;
  usedMib: number | null;
  gpus: number[];
  /** Unix seconds. */
  shutdownAt: number | null;
  /** The server's sentence: "train.ipynb will be shut down in 4 min 50 s: idle 55 min, holding 12 GiB on GPU 1". */
  text: string;
}

/** A kernel the culler shut down. */
export interface CullReleased {
  kernelId: string;
  notebook: string | null;
  /** Unix seconds. */
  at: number;
  reason: string;
  freedMib: number | null;
  gpus: number[];
  /** "Shut down train.ipynb at 14:05: idle 60 min, holding 12 GiB on GPU 1 (freed)". */
  text: string;
}

export interface CullerInfo {
  on: boolean;
  afterS: number | null;
  warningS: number | null;
  warnings: CullWarning[];
  released: CullReleased[];
}

function record(value: unknown): Record<string, unknown> | null {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : null;
}

function text(value: unknown): string {
  return typeof value === 'string' ? value : '';
}

function numberOrNull(value: unknown): number | null {
  return isNumber(value) ? value : null;
}

function gpuList(value: unknown): number[] {
  return Array.isArray(value) ? value.filter(isNumber) : [];
}

/** A kernel's `activity` (null: none, an older server, or not an object). */
export function readActivity(value: unknown): KernelActivity | null {
  const activity = record(value);
  if (!activity) {
    return null;
  }
  return {
    state: typeof activity.state === 'string' ? activity.state : 'unknown',
    idleS: numberOrNull(activity.idle_s),
    text: text(activity.text).trim(),
    gpu: numberOrNull(activity.gpu),
    pid: numberOrNull(activity.pid),
    child: activity.child === true
  };
}

/** The answer's `culler` (null: none, an older server). Entries without a kernel id or a text are left out. */
export function readCuller(value: unknown): CullerInfo | null {
  const culler = record(value);
  if (!culler) {
    return null;
  }
  const warnings: CullWarning[] = [];
  const seen = new Set<string>();
  for (const item of Array.isArray(culler.warnings) ? culler.warnings : []) {
    const entry = record(item);
    if (!entry || typeof entry.kernel_id !== 'string' || !text(entry.text) || seen.has(entry.kernel_id)) {
      continue;
    }
    seen.add(entry.kernel_id); // one warning per kernel
    warnings.push({
      kernelId: entry.kernel_id,
      notebook: typeof entry.notebook === 'string' ? entry.notebook : null,
      usedMib: numberOrNull(entry.used_mib),
      gpus: gpuList(entry.gpus),
      shutdownAt: numberOrNull(entry.shutdown_at),
      text: text(entry.text)
    });
  }
  const released: CullReleased[] = [];
  for (const item of Array.isArray(culler.released) ? culler.released : []) {
    const entry = record(item);
    if (!entry || typeof entry.kernel_id !== 'string' || !text(entry.text) || !isNumber(entry.at)) {
      continue;
    }
    released.push({
      kernelId: entry.kernel_id,
      notebook: typeof entry.notebook === 'string' ? entry.notebook : null,
      at: entry.at,
      reason: text(entry.reason),
      freedMib: numberOrNull(entry.freed_mib),
      gpus: gpuList(entry.gpus),
      text: text(entry.text)
    });
  }
  return {
    on: culler.on === true,
    afterS: numberOrNull(culler.after_s),
    warningS: numberOrNull(culler.warning_s),
    warnings,
    released
  };
}

/** Whether the answer says every kernel of the server is idle (`all_idle`; false where it does not say). */
export function readAllIdle(answer: unknown): boolean {
  return record(answer)?.all_idle === true;
}

/** What a warned or released kernel is called: its notebook, else the start of its id. */
export function cullName(entry: { kernelId: string; notebook: string | null }, trans: Trans = plainTrans): string {
  if (entry.notebook) {
    return entry.notebook.split('/').pop() || entry.notebook;
  }
  return trans.__('kernel %1', entry.kernelId.slice(0, 8));
}

// -- how often the feed asks ---------------------------------------------------------------------------------------

/**
 * Seconds between two requests: `refreshS` (the `refreshInterval` setting), or, while the latest answer says every
 * kernel is idle and nothing is warned, `idleS` (the `idleRefreshInterval` setting), but never slower than a third
 * of the culler's warning (a warning must reach the page before its shutdown) and never faster than `refreshS`.
 * `awake`: the user has just opened or used the sidebar (the usual interval, whatever the answer).
 */
export function pollSeconds(
  culler: CullerInfo | null,
  allIdle: boolean,
  refreshS: number,
  idleS: number,
  awake = false
): number {
  if (awake || !allIdle || (culler !== null && culler.warnings.length > 0)) {
    return refreshS;
  }
  let slow = idleS;
  if (culler !== null && culler.on && culler.warningS !== null && culler.warningS > 0) {
    slow = Math.min(slow, culler.warningS / 3);
  }
  return Math.max(refreshS, slow);
}

// -- the warnings' notifications -------------------------------------------------------------------------------------

/** What to do with the notifications after an answer: `open` new ones, `update` the text of open ones, `close` gone ones. */
export interface NoticePlan {
  open: CullWarning[];
  update: { warning: CullWarning; id: string }[];
  close: { kernelId: string; id: string }[];
}

interface Notice {
  /** The notification's id; null where the user closed it (not opened again for the same warning). */
  id: string | null;
  shutdownAt: number | null;
  text: string;
}

/**
 * One notification per warned kernel, never two across answers. A warning is the same while its `shutdown_at` is: a
 * kernel kept (or busy again) and warned later is a new warning, with a new notification. A warning the user
 * closed, or kept, stays closed until the answer says something new of that kernel.
 */
export class WarningNotices {
  /**
   * The plan for this answer's warnings (null culler: none). Call `opened` with each new notification's id; the
   * plan's `close` entries are forgotten already.
   */
  plan(culler: CullerInfo | null): NoticePlan {
    const plan: NoticePlan = { open: [], update: [], close: [] };
    const warnings = culler?.warnings ?? [];
    const now = new Set(warnings.map(w => w.kernelId));
    for (const [kernelId, notice] of this._notices) {
      if (!now.has(kernelId)) {
        if (notice.id !== null) {
          plan.close.push({ kernelId, id: notice.id });
        }
        this._notices.delete(kernelId);
      }
    }
    for (const warning of warnings) {
      const notice = this._notices.get(warning.kernelId);
      if (notice && notice.shutdownAt === warning.shutdownAt) {
        if (notice.id !== null && notice.text !== warning.text) {
          notice.text = warning.text;
          plan.update.push({ warning, id: notice.id });
        }
        continue;
      }
      if (notice && notice.id !== null) {
        plan.close.push({ kernelId: warning.kernelId, id: notice.id }); // an older warning's notification
      }
      this._notices.delete(warning.kernelId);
      plan.open.push(warning);
    }
    return plan;
  }

  /** The notification opened for `warning`. */
  opened(warning: CullWarning, id: string): void {
    this._notices.set(warning.kernelId, { id, shutdownAt: warning.shutdownAt, text: warning.text });
  }

  /**
   * This kernel's warning needs no notification any more (the user closed it, or kept the kernel): it is not opened
   * again while the answers carry the same warning. Returns the id of its notification, if one was open.
   */
  closed(kernelId: string, shutdownAt: number | null): string | null {
    const notice = this._notices.get(kernelId);
    const id = notice?.id ?? null;
    this._notices.set(kernelId, { id: null, shutdownAt: notice?.shutdownAt ?? shutdownAt, text: notice?.text ?? '' });
    return id;
  }

  /** The kernel whose warning's notification has this id (null: none of ours). */
  kernelOf(id: string): string | null {
    for (const [kernelId, notice] of this._notices) {
      if (notice.id === id) {
        return kernelId;
      }
    }
    return null;
  }

  /** The open notification of this kernel's warning, if any. */
  idOf(kernelId: string): string | null {
    return this._notices.get(kernelId)?.id ?? null;
  }

  /** Every open notification's id, for closing them all (the page goes). */
  ids(): string[] {
    return [...this._notices.values()].map(n => n.id).filter((id): id is string => id !== null);
  }

  private _notices = new Map<string, Notice>();
}

// -- keep running ---------------------------------------------------------------------------------------------------

/** The outcome of POST tfgpu/api/keep, as the page says it. */
export interface KeepOutcome {
  ok: boolean;
  text: string;
}

/**
 * What to say after "Keep running": `status` is the HTTP status (null: no answer at all), `message` the server's
 * reason on a refusal.
 */
export function keepOutcome(name: string, status: number | null, message = '', trans: Trans = plainTrans): KeepOutcome {
  if (status !== null && status >= 200 && status < 300) {
    return { ok: true, text: trans.__('%1 keeps running', name) };
  }
  const why = message.trim();
  if (status === 404) {
    return {
      ok: false,
      text: why
        ? trans.__('Could not keep %1 running: %2', name, why)
        : trans.__('Could not keep %1 running: it is no longer warned (busy again, or already shut down).', name)
    };
  }
  if (status === null || status === 0) {
    return { ok: false, text: trans.__('Could not keep %1 running: the server did not answer.', name) };
  }
  return {
    ok: false,
    text: why
      ? trans.__('Could not keep %1 running (HTTP %2): %3', name, status, why)
      : trans.__('Could not keep %1 running (HTTP %2).', name, status)
  };
}

// -- released kernels -----------------------------------------------------------------------------------------------

/** Where the dismissed lines are kept: the browser's localStorage has this shape. */
export interface KeyStore {
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
}

/** The localStorage key of the dismissed "shut down" lines. */
export const DISMISSED_KEY = 'tfgpu_magic:culler-released-dismissed';

/** The most dismissed lines remembered (the oldest are forgotten first; the server keeps far fewer). */
export const DISMISSED_KEPT = 200;

/** The most "shut down" lines the sidebar shows. */
export const RELEASED_SHOWN = 3;

/** One released entry's key among the dismissed: its kernel and time. */
export function releasedKey(entry: { kernelId: string; at: number }): string {
  return `${entry.kernelId}@${entry.at}`;
}

/** The "shut down" lines this browser dismissed, kept in `store` (localStorage), so a page load keeps them hidden. */
export class DismissedReleases {
  constructor(private readonly _store: KeyStore | null, private readonly _key = DISMISSED_KEY) {
    this._keys = this._read();
  }

  has(entry: { kernelId: string; at: number }): boolean {
    return this._keys.includes(releasedKey(entry));
  }

  dismiss(entry: { kernelId: string; at: number }): void {
    const key = releasedKey(entry);
    if (this._keys.includes(key)) {
      return;
    }
    this._keys = [...this._keys, key].slice(-DISMISSED_KEPT);
    try {
      this._store?.setItem(this._key, JSON.stringify(this._keys));
    } catch {
      // Storage full or refused (a private window): dismissed for this page only.
    }
  }

  private _read(): string[] {
    try {
      const parsed = JSON.parse(this._store?.getItem(this._key) ?? '[]');
      return Array.isArray(parsed) ? parsed.filter((k): k is string => typeof k === 'string') : [];
    } catch {
      return [];
    }
  }

  private _keys: string[];
}

/** The "shut down" lines to show: the most recent first, at most `RELEASED_SHOWN`, less those dismissed here. */
export function releasedLines(culler: CullerInfo | null, dismissed: DismissedReleases): CullReleased[] {
  return (culler?.released ?? [])
    .filter(entry => !dismissed.has(entry))
    .sort((a, b) => b.at - a.at)
    .slice(0, RELEASED_SHOWN);
}

// -- the kernel's pause ----------------------------------------------------------------------------------------------

/**
 * A comm message saying the kernel paused its live pushes: `{"type": "paused", "reason": "idle" | "hidden"}`. Returns
 * the reason ("" for one it did not name), or null for any other message.
 */
export function pausedReason(data: unknown): string | null {
  const message = record(data);
  if (!message || message.type !== 'paused') {
    return null;
  }
  return typeof message.reason === 'string' ? message.reason : '';
}

/** The "This notebook" line while the kernel's pushes are paused. */
export function pausedLine(reason: string, trans: Trans = plainTrans): string {
  if (reason === 'idle') {
    return trans.__('paused: the kernel is idle');
  }
  if (reason === 'hidden' || reason === 'page') {
    return trans.__('paused: the page is hidden');
  }
  return trans.__('paused by the kernel');
}
