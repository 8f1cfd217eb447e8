/**
 * The server's answer (GET tfgpu/api/gpus) as the page keeps it, the pure half of the one feed that the sidebar
 * and the status-bar item both read (feed.ts polls; neither view asks the server or reads the other):
 * - `Demand`: who needs the answer now (the sidebar while shown, the status-bar item while its setting is on);
 * - `AnswerState`: the latest answer and what is read from it once for every view (words, setting words, the
 *   charts' history and clock, the culler's warnings and released kernels, whether every kernel is idle), or why
 *   the last request failed.
 */

import { CullerInfo, readAllIdle, readCuller } from './culler.js';
import { historyQuery, KeptHistory, mergeHistory } from './history.js';
import { isNumber } from './format.js';
import { readSettingWords, readWords, SettingWords, Words } from './words.js';

/** The readers that need the answer now, by name. */
export class Demand {
  /** Note whether `reader` needs the answer; true when that changed for it. */
  need(reader: string, on: boolean): boolean {
    if (this._readers.has(reader) === on) {
      return false;
    }
    if (on) {
      this._readers.add(reader);
    } else {
      this._readers.delete(reader);
    }
    return true;
  }

  /** Whether any reader needs the answer. */
  get needed(): boolean {
    return this._readers.size > 0;
  }

  /** The readers that need it, in the order they came. */
  get readers(): string[] {
    return [...this._readers];
  }

  private _readers = new Set<string>();
}

/** Why the last request got no answer: the HTTP status, or null where the server did not answer at all. */
export interface FeedFailure {
  status: number | null;
}

/**
 * Whether the poll may rest: nobody needs the answer, and the settings have been named (the saved settings'
 * reading waits for the first answer that names them, so that one is asked for whatever the demand).
 */
export function mayRest(demand: Demand, state: AnswerState): boolean {
  return !demand.needed && state.settingWords !== null;
}

/** The latest answer and what every view reads of it. */
export class AnswerState {
  /** The latest answer as it came (undefined before the first); kept through failures. */
  get data(): unknown {
    return this._data;
  }

  /** The latest answer while the last request got one; null while it failed or before the first (no old figures). */
  get current(): unknown {
    return this._failure === null && this._data !== undefined ? this._data : null;
  }

  /** The answer's words for states and missing values (null: none, an older server). */
  get words(): Words | null {
    return this._words;
  }

  /**
   * The settings a notebook can save, from the latest answer that named them: kept through failures and answers
   * without them (the server's package does not change under a running page).
   */
  get settingWords(): SettingWords | null {
    return this._settingWords;
  }

  /** The GPUs' recent samples, merged from answer to answer (null: the server sent none). */
  get history(): KeptHistory | null {
    return this._history;
  }

  /** The server's time of its last answer (unix seconds): the charts' right edge, never the browser's clock. */
  get serverNow(): number | null {
    return this._serverNow;
  }

  /** The GPU-aware culler's state (warnings, released kernels) from the latest answer; null from an older server. */
  get culler(): CullerInfo | null {
    return this._culler;
  }

  /** Whether the latest answer said every kernel of the server is idle (false while the last request failed). */
  get allIdle(): boolean {
    return this._failure === null && this._allIdle;
  }

  /** Why the last request failed; null when it was answered (or none was made yet). */
  get failure(): FeedFailure | null {
    return this._failure;
  }

  /** The query of the next request: the whole chart window at first, then only what is new. */
  query(): Record<string, string> {
    return historyQuery(this._history);
  }

  /** Take an answer. */
  take(data: unknown): void {
    this._data = data;
    this._failure = null;
    const answer = typeof data === 'object' && data !== null ? (data as Record<string, unknown>) : {};
    this._words = readWords(answer.words);
    this._settingWords = readSettingWords(answer.setting_words) ?? this._settingWords;
    const takenAt = isNumber(answer.taken_at) ? answer.taken_at : null;
    this._history = mergeHistory(this._history, answer.history, takenAt);
    const latest = this._history?.latest ?? null;
    this._serverNow = takenAt === null ? latest : latest === null ? takenAt : Math.max(takenAt, latest);
    this._culler = readCuller(answer.culler);
    this._allIdle = readAllIdle(answer);
  }

  /** A request failed with this HTTP status (null: no answer at all). */
  fail(status: number | null): void {
    this._failure = { status };
  }

  private _data: unknown = undefined;
  private _words: Words | null = null;
  private _settingWords: SettingWords | null = null;
  private _history: KeptHistory | null = null;
  private _serverNow: number | null = null;
  private _failure: FeedFailure | null = null;
  private _culler: CullerInfo | null = null;
  private _allIdle = false;
}
