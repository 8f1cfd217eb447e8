/**
 * Applying the saved settings at kernel start: the code and user expression the sidebar sends (their Python
 * is in constants.ts), the execute reply as an `ApplyReply`, the apply-status line, and the kernel's
 * refusals and other comm messages (validate answers, restart requests).
 */

import { PY_APPLY_USER_EXPRESSION, pyApplyCall } from '../constants.js';
import { consentView } from './consent.js';
import { plainTrans, Trans } from './format.js';
import { Level, Sections, statusWords, text } from './notebook.js';
import type { SettingWords, Words } from './words.js';
import { canonicalSettings, checkSettings, isPlainObject, SavedDocument, SavedSettings, shortJSON } from './saved.js';
import { freshOutcomes } from './restart.js';

// -- applying them at kernel start --------------------------------------------------------------------------

/** What the silent apply asks back: the kernel's result of the apply, as JSON. */
export const APPLY_USER_EXPRESSION = PY_APPLY_USER_EXPRESSION;

/**
 * The code the sidebar runs silently at kernel start. The document goes in as a JSON string literal,
 * which is a valid Python string literal too.
 */
export function applyCode(saved: SavedDocument | unknown): string {
  return pyApplyCall(JSON.stringify(saved));
}

/** One setting's outcome as the kernel reports it. */
export interface ApplyOutcome {
  setting: string;
  asked: string;
  status: string;
  detail: string;
}

/**
 * What became of the silent apply, from its execute reply:
 * - `result`: the kernel ran it; `ok` false means `message` says why it stopped: before TensorFlow is imported
 *   nothing was applied; after, `outcomes` are those that took effect already and `notApplied` the rest.
 *   `reason` is the kernel's key for why, where it gives one: "ran_cells" (this kernel had run cells already,
 *   so nothing was tried: not a refusal, they apply at its next start);
 * - `not-installed`: tfgpu_magic is not importable in the kernel;
 * - `interrupted`: aborted, interrupted, or the kernel went away before it answered;
 * - `error`: anything else (a bug, a kernel that is not Python): `message` has the kernel's words.
 */
export type ApplyReply =
  | {
      kind: 'result';
      ok: boolean;
      message: string | null;
      outcomes: ApplyOutcome[];
      placement: 'on' | 'off' | null;
      notApplied: string[];
      reason: string | null;
    }
  | { kind: 'not-installed'; message: string }
  | { kind: 'interrupted' }
  | { kind: 'error'; message: string };

const NOT_INSTALLED = new Set(['ModuleNotFoundError', 'ImportError']);

function errorWords(content: { ename?: unknown; evalue?: unknown }, trans: Trans): string {
  const ename = typeof content.ename === 'string' ? content.ename : '';
  const evalue = typeof content.evalue === 'string' ? content.evalue : '';
  return [ename, evalue].filter(Boolean).join(': ') || trans.__('unknown error');
}

/** Read the execute reply's content (null: no reply came, the future was canceled). */
export function parseApplyReply(content: unknown, trans: Trans = plainTrans): ApplyReply {
  if (!isPlainObject(content)) {
    return { kind: 'interrupted' };
  }
  const status = content.status;
  if (status === 'abort' || status === 'aborted') {
    return { kind: 'interrupted' };
  }
  if (status === 'error') {
    if (content.ename === 'KeyboardInterrupt') {
      return { kind: 'interrupted' };
    }
    if (typeof content.ename === 'string' && NOT_INSTALLED.has(content.ename)) {
      return { kind: 'not-installed', message: errorWords(content, trans) };
    }
    return { kind: 'error', message: errorWords(content, trans) };
  }
  if (status !== 'ok') {
    return { kind: 'error', message: trans.__('unexpected reply status %1', shortJSON(status, 30)) };
  }
  const expressions = isPlainObject(content.user_expressions) ? content.user_expressions : {};
  const expression = expressions.tfgpu;
  if (!isPlainObject(expression)) {
    return { kind: 'error', message: trans.__('the kernel returned no result') };
  }
  if (expression.status !== 'ok') {
    if (typeof expression.ename === 'string' && NOT_INSTALLED.has(expression.ename)) {
      return { kind: 'not-installed', message: errorWords(expression, trans) };
    }
    return { kind: 'error', message: errorWords(expression, trans) };
  }
  const data = isPlainObject(expression.data) ? expression.data : {};
  const result = data['application/json'];
  if (!isPlainObject(result) || typeof result.ok !== 'boolean') {
    return { kind: 'error', message: trans.__('unexpected result %1', shortJSON(data['text/plain'] ?? result)) };
  }
  const outcomes: ApplyOutcome[] = (Array.isArray(result.outcomes) ? result.outcomes : [])
    .filter(isPlainObject)
    .map(o => ({
      setting: typeof o.setting === 'string' ? o.setting : '',
      asked: typeof o.asked === 'string' ? o.asked : '',
      status: typeof o.status === 'string' ? o.status : '',
      detail: typeof o.detail === 'string' ? o.detail : ''
    }));
  const placement = result.placement === 'on' || result.placement === 'off' ? result.placement : null;
  const notApplied = (Array.isArray(result.not_applied) ? result.not_applied : []).filter(
    (name): name is string => typeof name === 'string'
  );
  return {
    kind: 'result',
    ok: result.ok,
    message: typeof result.message === 'string' && result.message ? result.message : null,
    outcomes,
    placement,
    notApplied,
    reason: typeof result.reason === 'string' && result.reason ? result.reason : null
  };
}

/**
 * The kernel's latest progress line in a stream text of the apply (`visible auto --wait` prints one per poll while
 * it waits, each starting "tfgpu: "), without that prefix; null when the text has none.
 */
export function waitProgress(text: unknown): string | null {
  if (typeof text !== 'string') {
    return null;
  }
  const lines = text
    .split('\n')
    .map(line => line.trim())
    .filter(line => line.startsWith('tfgpu: '));
  const last = lines.length ? lines[lines.length - 1].slice('tfgpu: '.length).trim() : '';
  return last || null;
}

/**
 * Where the saved settings of one notebook stand, as the sidebar shows it:
 * - `applying`: sent at kernel start, no answer yet; `progress`: the kernel's latest line while it waits (a saved
 *   `visible auto --wait`), which the user may cancel (`cancelling`: asked, the kernel not answered yet);
 * - `done`: the kernel answered (`afterRestart`: the start was our "Restart kernel and apply"; `cancelled`: the
 *   user cancelled it while it waited);
 * - `skipped`: apply_on_start is on but the metadata cannot be applied (`message` says why);
 * - `consent`: the user has not agreed to these settings for this notebook (model/consent.ts), so nothing was
 *   sent at this start: they wait for the user's "Apply saved settings".
 * `consented`: sent by the user's "Apply saved settings", not by a kernel start.
 */
export type ApplyState =
  | {
      kind: 'applying';
      afterRestart: boolean;
      settings?: SavedSettings;
      consented?: boolean;
      progress?: string;
      cancelling?: boolean;
    }
  | {
      kind: 'done';
      reply: ApplyReply;
      afterRestart: boolean;
      kernelName: string;
      settings?: SavedSettings;
      consented?: boolean;
      cancelled?: boolean;
    }
  | { kind: 'skipped'; message: string }
  | { kind: 'consent'; settings: SavedSettings };

/**
 * Whether the notebook's saved settings differ from those its kernel was given at its start (they were
 * edited since): the sidebar then says they apply at the next start.
 */
export function savedChangedSince(state: ApplyState | null, saved: SavedSettings | null): boolean {
  // Settings waiting for consent were not given to the kernel: its button applies the current ones.
  if (!state || state.kind === 'skipped' || state.kind === 'consent' || !state.settings) {
    return false;
  }
  return canonicalSettings(state.settings) !== canonicalSettings(saved);
}

/** "cpus 3 → applied (3 logical CPUs); placement on". */
export function outcomesText(
  outcomes: ApplyOutcome[],
  placement: 'on' | 'off' | null,
  trans: Trans = plainTrans,
  words: Words | null = null
): string {
  const parts = outcomes.map(o => {
    const status = statusWords(o.status, trans, words).words;
    const head = trans.__('%1 %2 → %3', o.setting, o.asked, status).replace(/\s+/g, ' ');
    // "waiting for import" says it all: its detail ("applied when TensorFlow is imported") only repeats it.
    return o.detail && o.status !== 'pending' ? trans.__('%1 (%2)', head, o.detail) : head;
  });
  if (placement !== null) {
    parts.push(placement === 'on' ? trans.__('placement on') : trans.__('placement off'));
  }
  return parts.join('; ');
}

/**
 * The apply-status line's text, colour, and the button it offers; while the kernel waits, its progress line and
 * the Cancel button (`cancelling`: pressed, disabled).
 */
export interface ApplyStatusView {
  text: string;
  level: Level;
  retry: boolean;
  restart?: boolean;
  progress?: string;
  cancel?: boolean;
  cancelling?: boolean;
}

/**
 * The apply-status line of the "Saved settings" section (null state: nothing was applied here), with the
 * kernel's words for the settings' states. `retry`: offer "Try again"; `restart`: offer "Restart kernel and
 * apply" (the kernel had run cells, so they were not tried: not an error, the restart is the way to have them).
 * `kernel`: the kernel's comm section, whose record replaces an outcome still "waiting for import".
 */
export function applyStatusView(
  state: ApplyState | null,
  trans: Trans = plainTrans,
  words: Words | null = null,
  kernel: Sections | null = null
): ApplyStatusView | null {
  if (state === null) {
    return null;
  }
  if (state.kind === 'skipped') {
    return { text: trans.__('Saved settings not applied at kernel start: %1', state.message), level: 'error', retry: false };
  }
  if (state.kind === 'consent') {
    // Neutral, not an error: nothing went wrong, the notebook waits for the user (saved.ts adds the button).
    return { text: consentView(state.settings, trans).text, level: 'info', retry: false };
  }
  if (state.kind === 'applying') {
    const view: ApplyStatusView = {
      text: state.afterRestart
        ? trans.__('Kernel restarting; applying the saved settings…')
        : trans.__('Applying the saved settings…'),
      level: 'info',
      retry: false
    };
    if (state.progress) {
      // It waits (for a GPU, say): the user's cells wait behind it, so the wait can be cancelled.
      view.text = trans.__('Waiting to apply the saved settings; cells run once it ends:');
      view.progress = state.progress;
      view.cancel = true;
      view.cancelling = state.cancelling === true;
    }
    return view;
  }
  const reply = state.reply;
  const consented = state.consented === true;
  if (state.cancelled && (reply.kind === 'interrupted' || (reply.kind === 'result' && !reply.ok))) {
    const why = reply.kind === 'result' ? reply.message ?? trans.__('no reason given') : trans.__('interrupted');
    return { text: trans.__('Cancelled; saved settings not applied: %1', why), level: 'warn', retry: true };
  }
  switch (reply.kind) {
    case 'result': {
      if (!reply.ok && reply.reason === 'ran_cells') {
        return {
          text: trans.__(
            'Saved settings not applied now: this kernel has run cells already. They apply at its next start, or now with Restart kernel and apply.'
          ),
          level: 'info',
          retry: false,
          restart: true
        };
      }
      if (!reply.ok) {
        const why = reply.message ?? trans.__('no reason given');
        if (reply.outcomes.length > 0) {
          // After `import tensorflow` what it took stays: say it, beside what was refused.
          const took = outcomesText(reply.outcomes, null, trans, words);
          const rest = reply.notApplied.join(', ') || trans.__('the rest');
          return {
            text: consented
              ? trans.__('Saved settings partly applied: %1 took effect; not applied: %2, because %3', took, rest, why)
              : trans.__(
                  'Saved settings partly applied at kernel start: %1 took effect; not applied: %2, because %3',
                  took,
                  rest,
                  why
                ),
            level: 'error',
            retry: false
          };
        }
        return {
          text: consented
            ? trans.__('Saved settings not applied: %1', why)
            : trans.__('Saved settings refused at kernel start, none applied: %1', why),
          level: 'error',
          retry: false
        };
      }
      // What waited for `import tensorflow` reads as the kernel has it now (`kernel`: its comm's section).
      const outcomes = freshOutcomes(reply.outcomes, kernel);
      const what = outcomesText(outcomes, reply.placement, trans, words) || trans.__('nothing to apply');
      return {
        text: state.afterRestart
          ? trans.__('Kernel restarted; saved settings applied: %1', what)
          : consented
            ? trans.__('Saved settings applied: %1', what)
            : trans.__('Applied at kernel start: %1', what),
        level: 'ok',
        retry: false
      };
    }
    case 'not-installed':
      return {
        text: trans.__(
          "tfgpu_magic is not installed in this kernel's environment (%1): run `%pip install tfgpu_magic` in a cell of this notebook, then restart the kernel",
          state.kernelName || trans.__('unknown kernel')
        ),
        level: 'error',
        retry: false
      };
    case 'interrupted':
      return { text: trans.__('applying the saved settings was interrupted'), level: 'warn', retry: true };
    case 'error':
      return { text: trans.__('applying the saved settings failed: %1', reply.message), level: 'error', retry: true };
  }
}

// -- the kernel's refusals and its other messages ------------------------------------------------------

export interface RefusedRow {
  key: string;
  setting: string;
  asked: string;
  /** The kernel's whole message. */
  message: string;
  /** The magic's line: "%tfgpu limit 40%". */
  command: string;
  /** Why, in one line: "too late: TensorFlow's runtime is already initialized and limit can no longer change". */
  reason: string;
  /** The rest of the message (the tf.config call it would need, what to do), or "" when the reason says it all. */
  details: string;
}

/**
 * A refusal's message as a one-line reason and its details: the reason is the message without its "tfgpu: "
 * and the magic's line it starts with, up to its first parenthesis or semicolon; the details are the whole
 * message then.
 */
export function refusalParts(message: string, command: string): { reason: string; details: string } {
  let rest = message.trim().replace(/^tfgpu:\s*/, '');
  const quoted = `\`${command}\``;
  if (command && rest.startsWith(quoted)) {
    rest = rest.slice(quoted.length).trim();
  }
  rest = rest.replace(/^is\s+/, '');
  const cut = rest.search(/ \(|; /);
  const reason = (cut > 0 ? rest.slice(0, cut) : rest).trim();
  return { reason, details: reason === message.trim() || cut <= 0 ? '' : message.trim() };
}

/**
 * Settings the user asked for that the kernel refused as too late (its `kernel` section's `refused`), and
 * what a restart should apply instead (its `wanted`, in the metadata's settings form, checked against `words`;
 * null when absent, not of that shape, or the settings are not named yet).
 */
export function refusedView(
  kernel: Sections | null | undefined,
  words: SettingWords | null,
  trans: Trans = plainTrans
): { rows: RefusedRow[]; wanted: SavedSettings | null } {
  const refused: unknown[] = kernel && Array.isArray(kernel.refused) ? kernel.refused : [];
  const rows = refused.filter(isPlainObject).map((r, i) => {
    const setting = text(r.setting, trans);
    const asked = text(r.asked, trans);
    const message = text(r.message, trans) || trans.__('%1 %2 was refused: the runtime has started', setting, asked);
    const command = `%tfgpu ${setting} ${asked}`.trim();
    return { key: `refused-${setting}-${i}`, setting, asked, message, command, ...refusalParts(message, command) };
  });
  const checked = kernel && kernel.wanted !== undefined && words ? checkSettings(kernel.wanted, words, trans) : null;
  return { rows, wanted: checked && checked.ok ? checked.settings : null };
}

/** The kernel's answer to `{"request": "validate"}`: `errors` maps a setting ("" for the whole) to its message. */
export interface Validated {
  id: number;
  ok: boolean;
  errors: { [setting: string]: string };
  /** Values accepted only because NVML cannot list the GPUs: setting -> the kernel's words for that. */
  unchecked?: { [setting: string]: string };
}

/** A comm message of type `validated`, or null when it is not one. */
export function parseValidated(data: unknown): Validated | null {
  if (!isPlainObject(data) || data.type !== 'validated' || typeof data.id !== 'number') {
    return null;
  }
  const errors: { [setting: string]: string } = {};
  if (isPlainObject(data.errors)) {
    for (const [name, message] of Object.entries(data.errors)) {
      if (typeof message === 'string' && message) {
        errors[name] = message;
      }
    }
  }
  const unchecked: { [setting: string]: string } = {};
  if (isPlainObject(data.unchecked)) {
    for (const [name, message] of Object.entries(data.unchecked)) {
      if (typeof message === 'string' && message && !(name in errors)) {
        unchecked[name] = message;
      }
    }
  }
  return { id: data.id, ok: data.ok === true && Object.keys(errors).length === 0, errors, unchecked };
}

/**
 * A comm message `{"type": "request", "action": "restart-and-apply", "settings": {...}}` with settings that check
 * against `words`, or null.
 */
export function parseKernelRequest(
  data: unknown,
  words: SettingWords | null
): { action: 'restart-and-apply'; settings: SavedSettings } | null {
  if (!isPlainObject(data) || data.type !== 'request' || data.action !== 'restart-and-apply' || !words) {
    return null;
  }
  const checked = checkSettings(data.settings ?? {}, words);
  return checked.ok ? { action: 'restart-and-apply', settings: checked.settings } : null;
}
