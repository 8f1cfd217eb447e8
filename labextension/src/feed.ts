/**
 * The one feed of the server's answer (GET tfgpu/api/gpus): it polls, keeps the latest answer (model/feed.ts
 * `AnswerState`) and says when it changed. The sidebar and the status-bar item both read it, and neither reads
 * the other: each says when it needs the answer (`need`), and the feed polls while any does (the page visible),
 * and until the first answer has named the settings (the saved settings' reading waits for them). While the
 * latest answer says every kernel is idle and the culler warns of none, it asks every `idleInterval` seconds
 * (model/culler.ts `pollSeconds`), at `interval` again as soon as that changes or the user `wake`s it.
 *
 * Imports Lumino and the pure model only, with their `.js` (the request is handed in), so `node --test` runs it.
 */
import { Poll } from '@lumino/polling';
import { ISignal, Signal } from '@lumino/signaling';

import {
  AWAKE_MS,
  DEFAULT_IDLE_REFRESH_S,
  DEFAULT_REFRESH_S,
  MAX_BACKOFF_MS,
  MAX_IDLE_REFRESH_S,
  MAX_REFRESH_S,
  MIN_IDLE_REFRESH_S,
  MIN_REFRESH_S
} from './constants.js';
import {
  AnswerState,
  CullerInfo,
  Demand,
  FeedFailure,
  KeptHistory,
  mayRest,
  pollSeconds,
  SettingWords,
  Words
} from './model/index.js';

/** Clamp a refresh interval (seconds) into what the settings schema allows. */
export function clampInterval(seconds: unknown): number {
  const value = typeof seconds === 'number' && Number.isFinite(seconds) ? seconds : DEFAULT_REFRESH_S;
  return Math.min(MAX_REFRESH_S, Math.max(MIN_REFRESH_S, value));
}

/** Clamp the idle refresh interval (seconds) into what the settings schema allows. */
export function clampIdleInterval(seconds: unknown): number {
  const value = typeof seconds === 'number' && Number.isFinite(seconds) ? seconds : DEFAULT_IDLE_REFRESH_S;
  return Math.min(MAX_IDLE_REFRESH_S, Math.max(MIN_IDLE_REFRESH_S, value));
}

/**
 * The HTTP status of a failed request (`ServerConnection.ResponseError` carries its response), or null where the
 * server did not answer; read by shape, so this file needs no JupyterLab import.
 */
export function failedStatus(error: unknown): number | null {
  const status = (error as { response?: { status?: unknown } } | null)?.response?.status;
  return typeof status === 'number' ? status : null;
}

/** The poll's frequency at this interval (s): backing off up to a minute while the server does not answer. */
function frequencyOf(seconds: number): { interval: number; backoff: boolean; max: number } {
  const interval = Math.round(seconds * 1000);
  return { interval, backoff: true, max: Math.max(MAX_BACKOFF_MS, interval) };
}

export interface IGpuFeedOptions {
  /** One request of the answer with this query (`?history=600&since=...`). */
  request: (query: Record<string, string>) => Promise<unknown>;
  /** Seconds between two polls (the `refreshInterval` setting). */
  interval?: number;
  /** Seconds between two polls while every kernel is idle and nothing is warned (the `idleRefreshInterval` setting). */
  idleInterval?: number;
  /** The clock in ms (`Date.now`; the tests move their own). */
  now?: () => number;
}

export class GpuFeed {
  constructor(options: IGpuFeedOptions) {
    this._request = options.request;
    this._now = options.now ?? Date.now;
    this._refreshS = clampInterval(options.interval ?? DEFAULT_REFRESH_S);
    this._idleS = clampIdleInterval(options.idleInterval ?? DEFAULT_IDLE_REFRESH_S);
    this._poll = new Poll({
      auto: true,
      factory: () => this._fetch(),
      frequency: frequencyOf(this._refreshS),
      name: 'tfgpu_magic:gpus',
      // Resting, it asks nothing; otherwise it asks while the page is visible. No lingering tick once the page is
      // hidden (Lumino's default asks once more): a background tab asks nothing at all.
      linger: 0,
      standby: () => mayRest(this._demand, this._state) || 'when-hidden'
    });
    if (typeof document !== 'undefined') {
      document.addEventListener('visibilitychange', this._onVisibility);
    }
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

  /** The culler's warnings and released kernels from the latest answer (null: an older server, or none yet). */
  get culler(): CullerInfo | null {
    return this._state.culler;
  }

  /** Whether any reader needs the answer now. */
  get needed(): boolean {
    return this._demand.needed;
  }

  /**
   * `reader` needs the answer (`on`) or no longer does. A reader that starts needing it gets a fresh one at once
   * (the sidebar just shown) unless `fresh` is false (it has just read one); with no reader left the poll rests
   * from its next tick.
   */
  need(reader: string, on: boolean, fresh = true): void {
    if (this._demand.need(reader, on) && on && fresh) {
      void this.refresh();
    }
  }

  /** Ask now (after a shut-down: the row goes with this answer), not at the next tick. */
  refresh(): Promise<void> {
    return this._poll.refresh();
  }

  /** Seconds between two polls (the `refreshInterval` setting); applied at once. */
  set interval(seconds: number) {
    this._refreshS = clampInterval(seconds);
    this._pace(true);
  }

  get interval(): number {
    return this._refreshS;
  }

  /** Seconds between two polls while every kernel is idle and nothing is warned; applied at once. */
  set idleInterval(seconds: number) {
    this._idleS = clampIdleInterval(seconds);
    this._pace(true);
  }

  get idleInterval(): number {
    return this._idleS;
  }

  /** Seconds until the next poll as things stand (the usual interval, or the idle one). */
  get pollInterval(): number {
    return this._poll.frequency.interval / 1000;
  }

  /**
   * The user opened or used a view: the usual interval for a while (`AWAKE_MS`) whatever the answers say, and a
   * fresh answer at once where the feed was asking at the idle one.
   */
  wake(): void {
    this._awakeUntil = this._now() + AWAKE_MS;
    this._pace(true);
  }

  get isDisposed(): boolean {
    return this._poll.isDisposed;
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    if (typeof document !== 'undefined') {
      document.removeEventListener('visibilitychange', this._onVisibility);
    }
    this._poll.dispose();
    Signal.clearData(this);
  }

  /**
   * Set the poll's interval from the settings and the latest answer. `now` (a setting changed, the user woke it):
   * where the interval changed while a reader needs the answer, ask at once (the tick already scheduled may be the
   * idle interval away).
   */
  private _pace(now = false): void {
    const seconds = pollSeconds(
      this._state.culler,
      this._state.allIdle,
      this._refreshS,
      this._idleS,
      this._now() < this._awakeUntil
    );
    const interval = Math.round(seconds * 1000);
    const before = this._poll.frequency.interval;
    if (before === interval) {
      return;
    }
    this._poll.frequency = frequencyOf(seconds);
    if (now && this._demand.needed) {
      void this._poll.refresh();
    }
  }

  /** The page is shown again: where the feed asks at the idle interval, a fresh answer now, not a minute later. */
  private _onVisibility = (): void => {
    if (document.visibilityState === 'visible' && this._demand.needed && this.pollInterval > this._refreshS) {
      void this._poll.refresh();
    }
  };

  private async _fetch(): Promise<void> {
    let data: unknown;
    try {
      data = await this._request(this._state.query());
    } catch (error) {
      this._state.fail(failedStatus(error));
      this._pace(); // backs off from the usual interval, not from the idle one
      this._changed.emit();
      throw error; // the poll backs off
    }
    this._state.take(data);
    this._pace(); // the next tick is scheduled once this resolves: at the interval this answer calls for
    this._changed.emit();
  }

  private _request: (query: Record<string, string>) => Promise<unknown>;
  private _now: () => number;
  private _refreshS: number;
  private _idleS: number;
  private _awakeUntil = -Infinity;
  private _poll: Poll;
  private _demand = new Demand();
  private _state = new AnswerState();
  private _changed = new Signal<this, void>(this);
}
