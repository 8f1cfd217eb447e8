/**
 * The one feed of the server's answer (GET tfgpu/api/gpus): it polls, keeps the latest answer (model/feed.ts
 * `AnswerState`) and says when it changed. The sidebar and the status-bar item both read it, and neither reads
 * the other: each says when it needs the answer (`need`), and the feed polls while any does (the page visible),
 * and until the first answer has named the settings (the saved settings' reading waits for them).
 *
 * Imports Lumino and the pure model only, with their `.js` (the request is handed in), so `node --test` runs it.
 */
import { Poll } from '@lumino/polling';
import { ISignal, Signal } from '@lumino/signaling';

import { DEFAULT_REFRESH_S, MAX_BACKOFF_MS, MAX_REFRESH_S, MIN_REFRESH_S } from './constants.js';
import { AnswerState, Demand, FeedFailure, KeptHistory, mayRest, SettingWords, Words } from './model/index.js';

/** Clamp a refresh interval (seconds) into what the settings schema allows. */
export function clampInterval(seconds: unknown): number {
  const value = typeof seconds === 'number' && Number.isFinite(seconds) ? seconds : DEFAULT_REFRESH_S;
  return Math.min(MAX_REFRESH_S, Math.max(MIN_REFRESH_S, value));
}

/**
 * The HTTP status of a failed request (`ServerConnection.ResponseError` carries its response), or null where the
 * server did not answer; read by shape, so this file needs no JupyterLab import.
 */
export function failedStatus(error: unknown): number | null {
  const status = (error as { response?: { status?: unknown } } | null)?.response?.status;
  return typeof status === 'number' ? status : null;
}

export interface IGpuFeedOptions {
  /** One request of the answer with this query (`?history=600&since=...`). */
  request: (query: Record<string, string>) => Promise<unknown>;
  /** Seconds between two polls (the `refreshInterval` setting). */
  interval?: number;
}

export class GpuFeed {
  constructor(options: IGpuFeedOptions) {
    this._request = options.request;
    const interval = clampInterval(options.interval ?? DEFAULT_REFRESH_S) * 1000;
    this._poll = new Poll({
      auto: true,
      factory: () => this._fetch(),
      frequency: { interval, backoff: true, max: MAX_BACKOFF_MS },
      name: 'tfgpu_magic:gpus',
      // Resting, it asks nothing; otherwise it asks while the page is visible.
      standby: () => mayRest(this._demand, this._state) || 'when-hidden'
    });
  }

  /** Emitted after every request: an answer, or a failure. */
  get changed(): ISignal<this, void> {
    return this._changed;
  }

  /** The latest answer as it came (undefined before the first); kept through failures. */
  get data(): unknown {
    return this._state.data;
  }

  /** The latest answer while the last request got one; null while it failed (old figures are not current). */
  get current(): unknown {
    return this._state.current;
  }

  /** Why the last request failed; null when it was answered. */
  get failure(): FeedFailure | null {
    return this._state.failure;
  }

  /** The answer's words for states and missing values. */
  get words(): Words | null {
    return this._state.words;
  }

  /** The settings a notebook can save, as the server names them (null until an answer named them). */
  get settingWords(): SettingWords | null {
    return this._state.settingWords;
  }

  /** The GPUs' recent samples (null: the server sent none). */
  get history(): KeptHistory | null {
    return this._state.history;
  }

  /** The server's time of its last answer (unix seconds). */
  get serverNow(): number | null {
    return this._state.serverNow;
  }

  /** Whether any reader needs the answer now. */
  get needed(): boolean {
    return this._demand.needed;
  }

  /**
   * `reader` needs the answer (`on`) or no longer does. A reader that starts needing it gets a fresh one at once
   * (the sidebar just shown); with no reader left the poll rests from its next tick.
   */
  need(reader: string, on: boolean): void {
    if (this._demand.need(reader, on) && on) {
      void this.refresh();
    }
  }

  /** Ask now (after a shut-down: the row goes with this answer), not at the next tick. */
  refresh(): Promise<void> {
    return this._poll.refresh();
  }

  /** Seconds between two polls; applied at once. */
  set interval(seconds: number) {
    const interval = clampInterval(seconds) * 1000;
    if (this._poll.frequency.interval === interval) {
      return;
    }
    this._poll.frequency = { interval, backoff: true, max: MAX_BACKOFF_MS };
    if (this._demand.needed) {
      void this._poll.refresh();
    }
  }

  get interval(): number {
    return this._poll.frequency.interval / 1000;
  }

  get isDisposed(): boolean {
    return this._poll.isDisposed;
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._poll.dispose();
    Signal.clearData(this);
  }

  private async _fetch(): Promise<void> {
    let data: unknown;
    try {
      data = await this._request(this._state.query());
    } catch (error) {
      this._state.fail(failedStatus(error));
      this._changed.emit();
      throw error; // the poll backs off
    }
    this._state.take(data);
    this._changed.emit();
  }

  private _request: (query: Record<string, string>) => Promise<unknown>;
  private _poll: Poll;
  private _demand = new Demand();
  private _state = new AnswerState();
  private _changed = new Signal<this, void>(this);
}
