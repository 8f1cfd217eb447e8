/**
 * The GPU-aware idle culler on the page: a JupyterLab notification for each kernel it warns of (the server's
 * sentence, kept current from answer to answer, with "Keep running"), closed when the warning goes; the POST that
 * keeps a kernel running; and the "shut down" lines the sidebar shows, less those dismissed in this browser. The
 * decisions are model/culler.ts's; this file only emits, updates and dismisses, and asks the server.
 */
import { Notification } from '@jupyterlab/apputils';
import type { TranslationBundle } from '@jupyterlab/translation';
import { ISignal, Signal } from '@lumino/signaling';

import { KEEP_FAILED_MS, KEPT_NOTICE_MS } from './constants';
import type { GpuFeed } from './feed';
import { failedStatus } from './feed';
import {
  CullReleased,
  CullWarning,
  cullName,
  DismissedReleases,
  KeepOutcome,
  keepOutcome,
  KeyStore,
  releasedLines,
  WarningNotices
} from './model';
import { dismissButton, el, line } from './render';

/** The feed's reader name for the warnings: they need the answer while the culler is on. */
const READER = 'culler';

export interface ICullerNoticesOptions {
  feed: GpuFeed;
  trans: TranslationBundle;
  /** POST tfgpu/api/keep for this kernel; rejects as `requestAPI` does (its `response.status`, its message). */
  keep(kernelId: string): Promise<unknown>;
  /** Where dismissed "shut down" lines are remembered (the browser's localStorage; null: this page only). */
  store: KeyStore | null;
}

/** The culler's warnings as notifications, and its state as the sidebar shows it. */
export class CullerNotices {
  constructor(options: ICullerNoticesOptions) {
    this._feed = options.feed;
    this._trans = options.trans;
    this._keep = options.keep;
    this._dismissed = new DismissedReleases(options.store);
    this._feed.changed.connect(this._onFeed, this);
    Notification.manager.changed.connect(this._onNotification, this);
    this._onFeed();
  }

  /** Emitted when what the sidebar shows of the culler changed (not on every answer: read `warnings` then). */
  get changed(): ISignal<this, void> {
    return this._changed;
  }

  /** The kernels warned of in the latest answer. */
  get warnings(): CullWarning[] {
    return this._feed.culler?.warnings ?? [];
  }

  /** The "shut down" lines to show (most recent first, at most 3, less those dismissed here). */
  get released(): CullReleased[] {
    return releasedLines(this._feed.culler, this._dismissed);
  }

  /** Whether a "Keep running" of this kernel is under way. */
  keeping(kernelId: string): boolean {
    return this._keeping.has(kernelId);
  }

  /** Why the last "Keep running" of this kernel failed ("" where it did not). */
  keepFailure(kernelId: string): string {
    return this._failures.get(kernelId) ?? '';
  }

  /** Hide this "shut down" line in this browser (and on its next visits). */
  dismissReleased(entry: CullReleased): void {
    this._dismissed.dismiss(entry);
    this._changed.emit();
  }

  /** "Keep running": ask the server, then close the warning's notification and say so, or say why not. */
  async keep(warning: CullWarning): Promise<KeepOutcome> {
    const name = cullName(warning, this._trans);
    if (this._keeping.has(warning.kernelId)) {
      return { ok: false, text: '' };
    }
    this._keeping.add(warning.kernelId);
    this._failures.delete(warning.kernelId);
    this._changed.emit();
    let outcome: KeepOutcome;
    try {
      await this._keep(warning.kernelId);
      outcome = keepOutcome(name, 200, '', this._trans);
    } catch (error) {
      const message = error instanceof Error ? error.message : '';
      outcome = keepOutcome(name, failedStatus(error), message, this._trans);
    } finally {
      this._keeping.delete(warning.kernelId);
    }
    if (this._isDisposed) {
      return outcome;
    }
    if (outcome.ok) {
      const id = this._notices.closed(warning.kernelId, warning.shutdownAt);
      if (id !== null) {
        Notification.dismiss(id);
      }
      Notification.success(outcome.text, { autoClose: KEPT_NOTICE_MS });
    } else {
      this._failures.set(warning.kernelId, outcome.text);
      Notification.error(outcome.text, { autoClose: KEEP_FAILED_MS });
    }
    this._changed.emit();
    void this._feed.refresh(); // the warning goes (or, refused, the answer says where it stands) now
    return outcome;
  }

  get isDisposed(): boolean {
    return this._isDisposed;
  }

  dispose(): void {
    if (this._isDisposed) {
      return;
    }
    this._isDisposed = true;
    this._feed.changed.disconnect(this._onFeed, this);
    this._feed.need(READER, false);
    Notification.manager.changed.disconnect(this._onNotification, this);
    for (const id of this._notices.ids()) {
      Notification.dismiss(id);
    }
    Signal.clearData(this);
  }

  private _onFeed(): void {
    const culler = this._feed.culler;
    if (this._feed.failure === null && this._feed.data !== undefined) {
      // The warnings must reach the page whatever else reads the answer (the sidebar closed, the status bar off).
      this._feed.need(READER, culler?.on === true, false);
    }
    if (this._feed.failure !== null) {
      return; // the last warnings stand until the server answers again
    }
    const plan = this._notices.plan(culler);
    for (const { id } of plan.close) {
      Notification.dismiss(id);
    }
    for (const { warning, id } of plan.update) {
      Notification.update({ id, message: warning.text, type: 'warning', autoClose: false, actions: this._actions(warning) });
    }
    for (const warning of plan.open) {
      const id = Notification.warning(warning.text, { autoClose: false, actions: this._actions(warning) });
      this._notices.opened(warning, id);
    }
    for (const kernelId of [...this._failures.keys()]) {
      if (!culler?.warnings.some(w => w.kernelId === kernelId)) {
        this._failures.delete(kernelId);
      }
    }
    const key = JSON.stringify([culler?.warnings ?? [], this.released.map(r => [r.kernelId, r.at, r.text])]);
    if (key !== this._key) {
      this._key = key;
      this._changed.emit();
    }
  }

  /** The notification's "Keep running" button: it stays open until the server answered. */
  private _actions(warning: CullWarning): Notification.IAction[] {
    return [
      {
        label: this._trans.__('Keep running'),
        caption: this._trans.__('Do not shut the kernel of %1 down now; it is warned again once idle that long again', cullName(warning, this._trans)),
        displayType: 'accent',
        callback: (event: MouseEvent) => {
          event.preventDefault();
          const current = this.warnings.find(w => w.kernelId === warning.kernelId) ?? warning;
          void this.keep(current);
        }
      }
    ];
  }

  /** The user closed a warning's notification: not opened again for the same warning (the sidebar still offers it). */
  private _onNotification(_: unknown, change: Notification.IChange): void {
    if (change.type !== 'removed') {
      return;
    }
    const kernelId = this._notices.kernelOf(change.notification.id);
    if (kernelId !== null) {
      this._notices.closed(kernelId, null);
    }
  }

  private _feed: GpuFeed;
  private _trans: TranslationBundle;
  private _keep: (kernelId: string) => Promise<unknown>;
  private _dismissed: DismissedReleases;
  private _notices = new WarningNotices();
  private _keeping = new Set<string>();
  private _failures = new Map<string, string>();
  private _key = '';
  private _isDisposed = false;
  private _changed = new Signal<this, void>(this);
}

/**
 * The sidebar's top lines on the culler: each warning with "Keep running" (for a user who closed its notification),
 * then the kernels it shut down, each with a button that hides the line in this browser. Empty: nothing to say.
 */
export function renderCuller(notices: CullerNotices, trans: TranslationBundle): HTMLElement[] {
  const nodes: HTMLElement[] = [];
  for (const warning of notices.warnings) {
    const item = el('div', 'tfgpu-cull-warning');
    item.dataset.kernelId = warning.kernelId;
    item.appendChild(line(warning.text, 'warn', 'tfgpu-cull-text'));
    const keeping = notices.keeping(warning.kernelId);
    const button = el(
      'button',
      'jp-Button jp-mod-styled jp-mod-accept tfgpu-keep',
      keeping ? trans.__('Keeping…') : trans.__('Keep running')
    );
    button.type = 'button';
    button.disabled = keeping;
    button.title = trans.__('Keep the kernel of %1 running', cullName(warning, trans));
    button.addEventListener('click', () => {
      void notices.keep(warning);
    });
    item.appendChild(button);
    const failure = notices.keepFailure(warning.kernelId);
    if (failure) {
      item.appendChild(line(failure, 'error', 'tfgpu-keep-error'));
    }
    nodes.push(item);
  }
  for (const entry of notices.released) {
    const item = el('div', 'tfgpu-cull-released');
    item.dataset.kernelId = entry.kernelId;
    item.appendChild(line(entry.text, 'muted', 'tfgpu-cull-text'));
    item.appendChild(dismissButton(trans, () => notices.dismissReleased(entry)));
    nodes.push(item);
  }
  return nodes;
}
