/**
 * Kernels that died holding GPU memory, on the page: one line each at the top of the sidebar (which notebook, when,
 * what it held, the likely cause), each with a button that hides it in this browser. The decisions are
 * model/deaths.ts's; this file only follows the feed, renders and dismisses.
 */
import type { TranslationBundle } from '@jupyterlab/translation';
import { ISignal, Signal } from '@lumino/signaling';

import type { GpuFeed } from './feed';
import type { KeyStore } from './model';
import { deathLine, deathLines, deathTitle, DismissedDeaths, KernelDeath, readDeaths } from './model/deaths';
import { browserStorage, dismissButton, el, line } from './render';

/** The deaths the latest answer carries, less those dismissed in this browser. */
export class KernelDeaths {
  constructor(feed: GpuFeed, store: KeyStore | null = browserStorage()) {
    this._feed = feed;
    this._dismissed = new DismissedDeaths(store);
    this._feed.changed.connect(this._onFeed, this);
    this._onFeed();
  }

  /** Emitted when the lines to show changed (not on every answer). */
  get changed(): ISignal<this, void> {
    return this._changed;
  }

  /** The lines to show: the most recent first, at most 3, less those dismissed here. */
  get lines(): KernelDeath[] {
    return deathLines(this._deaths, this._dismissed);
  }

  /** Hide this death's line in this browser (and on its next visits). */
  dismiss(death: KernelDeath): void {
    this._dismissed.dismiss(death);
    this._emitIfChanged();
  }

  dispose(): void {
    this._feed.changed.disconnect(this._onFeed, this);
    Signal.clearData(this);
  }

  private _onFeed(): void {
    if (this._feed.failure !== null || this._feed.data === undefined) {
      return; // the last lines stand until the server answers again
    }
    const answer = this._feed.data;
    this._deaths = readDeaths(typeof answer === 'object' && answer !== null ? (answer as any).dead_kernels : null);
    this._emitIfChanged();
  }

  private _emitIfChanged(): void {
    const key = JSON.stringify(this.lines.map(d => [d.kernelId, d.diedAt, d.restarted]));
    if (key !== this._key) {
      this._key = key;
      this._changed.emit();
    }
  }

  private _feed: GpuFeed;
  private _dismissed: DismissedDeaths;
  private _deaths: KernelDeath[] = [];
  private _key = '[]';
  private _changed = new Signal<this, void>(this);
}

/** The sidebar's death lines, each with its "hide" button. Empty: nothing to say. */
export function renderDeaths(deaths: KernelDeaths, trans: TranslationBundle): HTMLElement[] {
  return deaths.lines.map(death => {
    const item = el('div', 'tfgpu-death');
    item.dataset.kernelId = death.kernelId;
    const text = line(deathLine(death, trans), 'error', 'tfgpu-death-text');
    text.title = deathTitle(death, trans);
    item.appendChild(text);
    item.appendChild(dismissButton(trans, () => deaths.dismiss(death), 'tfgpu-death-dismiss'));
    return item;
  });
}
