/**
 * Whether a notebook's saved settings may apply at its kernel start without asking: JupyterLab's trust in
 * the notebook, and the user's remembered answer for that notebook (its path) and those settings.
 */

import { CONSENT_VERSION } from '../constants.js';
import { plainTrans, Trans } from './format.js';
import { isPlainObject, SavedDocument, SavedSettings, SETTING_NAMES, settingLines } from './saved.js';

// -- trust ----------------------------------------------------------------------------------------------

/** What trust needs of one cell model: its type, JupyterLab's `trusted` flag, and whether it holds code. */
export interface CellTrust {
  type: string;
  trusted: boolean;
  /** The cell's source has more than white space. */
  hasCode: boolean;
}

/**
 * Whether JupyterLab trusts the notebook, for applying its saved settings without asking.
 *
 * JupyterLab's rule (its trust status item, and `notebook:trust`, which says "already trusted"): every
 * code cell is trusted. A cell's `trusted` comes from the server's signature check (`mark_trusted_cells`):
 * every code cell of a notebook signed in this server's notary database is trusted, every code cell of any
 * other is not, with or without outputs. Measured in JupyterLab 4.6, two notebooks pass that rule with no
 * signature behind them, so they are not trusted here:
 * - a file with no cells: JupyterLab adds one empty code cell marked trusted ("1 of 1 code cells trusted");
 * - a file with no code cells: "0 of 0 code cells trusted" counts as trusted.
 * Hence also: at least one code cell with code in it. (A notebook of empty code cells asks once too.)
 *
 * Cells without outputs are a trap of another kind: the server signs, at every save, a notebook whose code
 * cells have no rich output (nbformat's `check_cells`: nothing to distrust), and JupyterLab often marks a
 * notebook changed as soon as it opens (its kernel fills in `language_info`, for one), so autosave signs an
 * untrusted notebook of code without outputs minutes after it is opened, and it is trusted at the next
 * opening. `startDecision` therefore keeps asking about settings it asked about once.
 */
export function notebookTrusted(cells: Iterable<CellTrust>): boolean {
  let code = false;
  for (const cell of cells) {
    if (cell.type !== 'code') {
      continue;
    }
    if (!cell.trusted) {
      return false;
    }
    code = code || cell.hasCode;
  }
  return code;
}

// -- the user's answers ---------------------------------------------------------------------------------

/**
 * One notebook's last question: the settings asked about (`settingsKey`) and whether the user agreed.
 * A notebook has one entry: settings that changed replace the entry on the next question.
 */
export interface ConsentEntry {
  path: string;
  settings: string;
  agreed: boolean;
}

/** What the state database keeps: the entries, the most recent last. */
export interface ConsentBook {
  version: number;
  entries: ConsentEntry[];
}

/** The most entries kept; the oldest go first. */
export const CONSENT_LIMIT = 500;

export function emptyConsentBook(): ConsentBook {
  return { version: CONSENT_VERSION, entries: [] };
}

/**
 * What the saved settings are, for comparing them with those agreed to: the version and each setting in
 * apply order. `apply_on_start` is left out: turning it off and on again applies the same settings.
 */
export function settingsKey(saved: SavedDocument): string {
  return JSON.stringify([saved.version, SETTING_NAMES.map(name => saved.settings[name] ?? null)]);
}

/** The stored book, as far as it reads; anything else (none yet, another version, damage) is an empty book. */
export function readConsentBook(raw: unknown): ConsentBook {
  if (!isPlainObject(raw) || raw.version !== CONSENT_VERSION || !Array.isArray(raw.entries)) {
    return emptyConsentBook();
  }
  const seen = new Set<string>();
  const entries: ConsentEntry[] = [];
  // Read from the newest, so a path that is there twice keeps its last answer.
  for (const entry of [...raw.entries].reverse()) {
    if (
      isPlainObject(entry) &&
      typeof entry.path === 'string' &&
      typeof entry.settings === 'string' &&
      typeof entry.agreed === 'boolean' &&
      !seen.has(entry.path)
    ) {
      seen.add(entry.path);
      entries.push({ path: entry.path, settings: entry.settings, agreed: entry.agreed });
    }
  }
  return { version: CONSENT_VERSION, entries: entries.reverse().slice(-CONSENT_LIMIT) };
}

/** The notebook's entry, or null. */
export function consentEntry(book: ConsentBook, path: string): ConsentEntry | null {
  return book.entries.find(entry => entry.path === path) ?? null;
}

/** A new book with this answer as the notebook's entry, the most recent; the oldest beyond `limit` dropped. */
export function recordConsent(
  book: ConsentBook,
  path: string,
  settings: string,
  agreed: boolean,
  limit: number = CONSENT_LIMIT
): ConsentBook {
  const entries = book.entries.filter(entry => entry.path !== path);
  entries.push({ path, settings, agreed });
  return { version: CONSENT_VERSION, entries: entries.slice(-Math.max(1, limit)) };
}

/**
 * Apply the saved settings at this kernel start, or ask first:
 * - the user agreed to these settings for this notebook: apply;
 * - the user was asked about these settings and has not agreed: ask again, trusted or not (the notebook
 *   may have become "trusted" only because the server signed it at an autosave; see `notebookTrusted`);
 * - otherwise (never asked, or asked about other settings): apply when the notebook is trusted.
 */
export function startDecision(trusted: boolean, entry: ConsentEntry | null, settings: string): 'apply' | 'ask' {
  if (entry && entry.settings === settings) {
    return entry.agreed ? 'apply' : 'ask';
  }
  return trusted ? 'apply' : 'ask';
}

// -- what the sidebar says ------------------------------------------------------------------------------

/**
 * The "Saved settings" section's line while the settings wait for the user (`trustedNow`: the user has
 * trusted the notebook since, with JupyterLab's Trust Notebook): the sentence, the note under the button,
 * the button's label and its tooltip.
 */
export function consentView(
  settings: SavedSettings,
  trustedNow: boolean,
  trans: Trans = plainTrans
): { text: string; note: string; button: string; title: string } {
  const list = settingLines(settings).join(', ') || trans.__('none');
  return {
    text: trustedNow
      ? trans.__('This notebook is trusted now: its saved settings (%1) apply at the next kernel start.', list)
      : trans.__('This notebook is not trusted: its saved settings (%1) were not applied.', list),
    note: trustedNow
      ? trans.__('Apply saved settings applies them in this kernel now.')
      : trans.__(
          'Apply saved settings applies them in this kernel now, and remembers it for this notebook: its next kernel starts apply them without asking, until the saved settings change.'
        ),
    button: trans.__('Apply saved settings'),
    title: trans.__('Apply the saved settings in the running kernel, and apply them at every start of this notebook’s kernel from now on')
  };
}
