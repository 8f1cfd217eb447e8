/**
 * The saved settings (the notebook's `tfgpu` metadata): reading and checking the metadata, the document to write,
 * the settings as `%tfgpu` lines and as a first cell, and the editor's texts. Which settings there are, their
 * order and which take one value per GPU come with the data (`SettingWords`, words.ts): nothing here names one.
 */

import { LOAD_EXTENSION_SOURCE, SAVED_VERSION } from '../constants.js';
import { plainTrans, Trans } from './format.js';
import { SettingWords, settingWord } from './words.js';

// -- saved settings (the notebook's `tfgpu` metadata) ------------------------------------------------------

/** The metadata version this sidebar reads and writes (defined with the other versions in constants.ts). */
export { SAVED_VERSION };

/** One setting's saved value: the text after `%tfgpu <name>`, or (a per-GPU setting) one such text per GPU. */
export type SettingValue = string | string[];
/**
 * Setting name -> value. Read or checked (`readSaved`, `checkSettings`), the names are the words' and in their
 * order, the kernel's apply order: the functions below that take no words keep the order they are given.
 */
export type SavedSettings = { [name: string]: SettingValue };

/** The notebook's `metadata.tfgpu`, as this sidebar writes it. */
export interface SavedDocument {
  version: number;
  apply_on_start: boolean;
  settings: SavedSettings;
}

/**
 * The notebook's `tfgpu` metadata read for its shape (the values are the kernel's to check):
 * - `none`: the notebook has no such key: nothing is ever run for it;
 * - `ok`: a document the kernel can be given (settings trimmed, in apply order);
 * - `newer`: written by a newer tfgpu_magic: not applied, not overwritten without asking;
 * - `invalid`: not the shape of the key: not applied; `message` says what is wrong;
 * - `waiting`: its settings cannot be read before the data has named the settings (`SettingWords`: the server's
 *   first answer brings them).
 */
export type SavedRead =
  | { kind: 'none' }
  | { kind: 'ok'; saved: SavedDocument }
  | { kind: 'newer'; version: number; message: string }
  | { kind: 'invalid'; message: string }
  | { kind: 'waiting'; message: string };

export function isPlainObject(value: unknown): value is { [key: string]: unknown } {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A value as JSON for a message, cut to `length` characters. */
export function shortJSON(value: unknown, length = 60): string {
  let out: string;
  try {
    out = JSON.stringify(value) ?? String(value);
  } catch {
    out = String(value);
  }
  return out.length > length ? `${out.slice(0, length - 1)}…` : out;
}

/**
 * A control character (a newline, a tab, an escape ...) or a line or paragraph separator: a value holding one is
 * refused, since `%tfgpu <name> <value>` must stay one line of the first cell (IPython splits a cell's lines at
 * U+2028 and U+2029 too).
 */
const CONTROL = /[\p{Cc}\u2028\u2029]/u;

/** Whether a value holds a character a `%tfgpu` line cannot hold (`CONTROL`). */
export function hasControl(value: string): boolean {
  return CONTROL.test(value);
}

/** The text with each such character written as an escape (`\n`, `\u2028`), to be shown. */
export function escapeControls(value: string): string {
  const named: { [char: string]: string } = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };
  return value.replace(
    new RegExp(CONTROL.source, 'gu'),
    char => named[char] ?? `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`
  );
}

/** A text cut to `length` characters. */
function shortText(text: string, length = 60): string {
  return text.length > length ? `${text.slice(0, length - 1)}…` : text;
}

/**
 * The settings' shape: an object of the words' names, each a non-empty string of one line, or for a per-GPU
 * setting a non-empty list of them. Returns the trimmed settings in the words' order (the kernel's apply order),
 * or what is wrong (the kernel's `normalise` checks the same).
 */
export function checkSettings(
  settings: unknown,
  words: SettingWords,
  trans: Trans = plainTrans
): { ok: true; settings: SavedSettings } | { ok: false; message: string } {
  if (!isPlainObject(settings)) {
    return { ok: false, message: trans.__('the saved settings are %1, not an object', shortJSON(settings)) };
  }
  const unknown = Object.keys(settings).filter(name => !settingWord(words, name));
  if (unknown.length) {
    return {
      ok: false,
      message: trans.__(
        'unknown saved setting %1; valid: %2',
        shortJSON(unknown[0], 40),
        words.map(word => word.name).join(', ')
      )
    };
  }
  const out: SavedSettings = {};
  for (const { name, perGpu } of words) {
    const value = settings[name];
    if (value === undefined || value === null) {
      continue;
    }
    const values = Array.isArray(value) ? value : [value];
    const good =
      values.length > 0 &&
      values.every(v => typeof v === 'string' && v.trim() !== '') &&
      (values.length === 1 || perGpu);
    if (!good) {
      return {
        ok: false,
        message: perGpu
          ? trans.__('saved %1 is %2: expected the text after `%tfgpu %1`, or a list of them, one per GPU', name, shortJSON(value))
          : trans.__('saved %1 is %2: expected the text after `%tfgpu %1`', name, shortJSON(value))
      };
    }
    const trimmed = (values as string[]).map(v => v.trim());
    const bad = trimmed.find(hasControl);
    if (bad !== undefined) {
      return {
        ok: false,
        message: trans.__(
          'saved %1 is "%2": it holds a control character (%3); each value is one line, the text after `%tfgpu %1`',
          name,
          shortText(escapeControls(bad)),
          escapeControls(bad.match(CONTROL)?.[0] ?? '')
        )
      };
    }
    out[name] = Array.isArray(value) ? trimmed : trimmed[0];
  }
  return { ok: true, settings: out };
}

/**
 * Read `metadata.tfgpu` (undefined when the notebook has none) for its shape, its settings against `words`
 * (null: not known yet, so a document with settings is `waiting`).
 */
export function readSaved(raw: unknown, words: SettingWords | null, trans: Trans = plainTrans): SavedRead {
  if (raw === undefined || raw === null) {
    return { kind: 'none' };
  }
  if (!isPlainObject(raw)) {
    return { kind: 'invalid', message: trans.__("the notebook's tfgpu metadata is %1, not an object", shortJSON(raw)) };
  }
  const version = raw.version === undefined ? SAVED_VERSION : raw.version;
  if (typeof version !== 'number' || !Number.isInteger(version) || version < 1) {
    return {
      kind: 'invalid',
      message: trans.__('bad tfgpu metadata version %1: expected %2', shortJSON(version), SAVED_VERSION)
    };
  }
  if (version > SAVED_VERSION) {
    return {
      kind: 'newer',
      version,
      message: trans.__(
        'saved by a newer tfgpu_magic (version %1); this one reads version %2',
        version,
        SAVED_VERSION
      )
    };
  }
  const apply = raw.apply_on_start === undefined ? false : raw.apply_on_start;
  if (typeof apply !== 'boolean') {
    return { kind: 'invalid', message: trans.__('apply_on_start is %1, not true or false', shortJSON(apply)) };
  }
  if (words === null) {
    return { kind: 'waiting', message: trans.__('waiting for the server to name the settings') };
  }
  const checked = checkSettings(raw.settings === undefined ? {} : raw.settings, words, trans);
  if (!checked.ok) {
    return { kind: 'invalid', message: checked.message };
  }
  return { kind: 'ok', saved: { version: SAVED_VERSION, apply_on_start: apply, settings: checked.settings } };
}

/** The metadata document to write for these settings (in the words' order). */
export function savedDocument(settings: SavedSettings, applyOnStart: boolean, words: SettingWords): SavedDocument {
  const checked = checkSettings(settings, words);
  return { version: SAVED_VERSION, apply_on_start: applyOnStart, settings: checked.ok ? checked.settings : {} };
}

/** Whether any setting is saved. */
export function hasSettings(settings: SavedSettings | null | undefined): boolean {
  return !!settings && Object.values(settings).some(value => value !== undefined && value !== null);
}

/**
 * The settings as tfgpu_magic/core/consent.py `canonical` writes them: names sorted, each a list of its values
 * trimmed, as JSON; so a value and a list of just that value, spaces around it or not, in any order of the names,
 * are the same settings.
 */
export function canonicalSettings(settings: SavedSettings | null | undefined): string {
  const out: { [name: string]: string[] } = {};
  for (const name of Object.keys(settings ?? {}).sort()) {
    const value = settings![name];
    if (value !== undefined && value !== null) {
      out[name] = (Array.isArray(value) ? value : [value]).map(v => String(v).trim());
    }
  }
  return JSON.stringify(out);
}

/** Each saved value as one `%tfgpu` argument line, in the settings' order: ["cpus 3", "limit 2GB --gpu 0", ...]. */
export function settingLines(settings: SavedSettings): string[] {
  const lines: string[] = [];
  for (const [name, value] of Object.entries(settings)) {
    for (const v of value === undefined || value === null ? [] : Array.isArray(value) ? value : [value]) {
      lines.push(`${name} ${v}`);
    }
  }
  return lines;
}

/**
 * The source of a first cell that sets the same up where nothing applies saved settings (nbconvert,
 * papermill): `%load_ext tfgpu_magic`, then one `%tfgpu <name> <value>` per saved value in apply order.
 * Takes the metadata document, or just its settings. Settings of another shape (a value with a newline among
 * them: `checkSettings`) give no `%tfgpu` line at all. The sidebar writes it only after the kernel's check
 * accepted the values (saved.ts `writeCheckedFirstCell`).
 */
export function firstCellSource(saved: SavedDocument | SavedSettings | unknown, words: SettingWords): string {
  const object = isPlainObject(saved) ? saved : {};
  const settings = isPlainObject(object.settings) ? object.settings : 'settings' in object ? {} : object;
  const checked = checkSettings(settings, words);
  const lines = checked.ok ? settingLines(checked.settings) : [];
  return [LOAD_EXTENSION_SOURCE, ...lines.map(line => `%tfgpu ${line}`)].join('\n');
}

/** Whether a cell's source is only `%load_ext tfgpu_magic` and `%tfgpu` lines (a first cell written before). */
export function isFirstCellSource(source: string): boolean {
  const lines = source
    .split('\n')
    .map(line => line.trim())
    .filter(Boolean);
  return lines[0] === LOAD_EXTENSION_SOURCE && lines.slice(1).every(line => /^%tfgpu\s+\S/.test(line));
}

/** One setting's value as the editor's text: a per-GPU list joins with "; ". */
export function editorText(value: SettingValue | undefined): string {
  return value === undefined ? '' : Array.isArray(value) ? value.join('; ') : value;
}

/** The editor's texts as settings, in the words' order: empty means not set; "a; b" is a per-GPU setting's list. */
export function settingsFromEditor(texts: { [name: string]: string | undefined }, words: SettingWords): SavedSettings {
  const out: SavedSettings = {};
  for (const { name, perGpu } of words) {
    const text = (texts[name] ?? '').trim();
    if (!text) {
      continue;
    }
    const parts = perGpu
      ? text
          .split(';')
          .map(part => part.trim())
          .filter(Boolean)
      : [text];
    if (parts.length) {
      out[name] = parts.length === 1 ? parts[0] : parts;
    }
  }
  return out;
}

/** The saved settings as rows to show, in their order: name and value text. */
export function savedRows(settings: SavedSettings): { name: string; value: string }[] {
  return Object.entries(settings)
    .filter(([, value]) => value !== undefined && value !== null)
    .map(([name, value]) => ({ name, value: editorText(value) }));
}
