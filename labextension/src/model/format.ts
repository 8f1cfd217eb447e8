/**
 * Formatting for the sidebar's model: the translation interface (`Trans`, `strfmt`, `plainTrans`), the
 * server's "not available" values (NA), numbers, sizes, durations and clock times as text, `show` (one value
 * as text) and `memoryBar` (used of total, as a GPU's or a MIG device's bar).
 */

import { keyWords, Words } from './words.js';

// -- translation ---------------------------------------------------------------------------------------

/** The part of JupyterLab's `TranslationBundle` the model uses. Placeholders are `%1`, `%2` ... */
export interface Trans {
  __(msgid: string, ...args: any[]): string;
  /** Plural form: `n` fills `%1`, the other arguments `%2` ... (as in JupyterLab's gettext). */
  _n(msgid: string, msgidPlural: string, n: number, ...args: any[]): string;
}

/** JupyterLab's placeholder rule: `%1` is the first argument, `%%` a literal percent sign. */
export function strfmt(fmt: string, ...args: any[]): string {
  return fmt
    .replace(/%%/g, '%% ')
    .replace(/%(\d+)/g, (_whole, i) => String(args[Number(i) - 1]))
    .replace(/%% /g, '%');
}

/** English, untranslated: what the sidebar shows without a language pack. */
export const plainTrans: Trans = {
  __: (msgid, ...args) => strfmt(msgid, ...args),
  _n: (msgid, msgidPlural, n, ...args) => strfmt(n === 1 ? msgid : msgidPlural, n, ...args)
};

// -- "not available" values and numbers --------------------------------------------------------------------

/** The server's marker for a figure NVML could not give: it may replace any GPU field. */
export interface NA {
  unavailable: string;
  detail?: string | null;
}

export function isNA(value: unknown): value is NA {
  return (
    typeof value === 'object' &&
    value !== null &&
    !Array.isArray(value) &&
    typeof (value as NA).unavailable === 'string'
  );
}

/** What the sidebar prints for one value: its text, a tooltip (why it is missing), and whether it is missing. */
export interface Shown {
  text: string;
  title: string;
  na: boolean;
}

/**
 * Why a value is missing, in words: the server's detail, or else the kind of failure in the data's words
 * (`words`; without them the kind's key, "no_permission" as "no permission").
 */
export function naReason(value: NA, trans: Trans = plainTrans, words: Words | null = null): string {
  if (typeof value.detail === 'string' && value.detail.trim()) {
    return value.detail;
  }
  const known = words?.missingReasons[value.unavailable];
  return known ? trans.__(known) : keyWords(value.unavailable);
}

/** The word for a value that could not be read: the data's ("n/a"), else "n/a". */
export function missingWord(words: Words | null, trans: Trans = plainTrans): string {
  return trans.__(words?.missing || 'n/a');
}

/** The word for a name that could not be read: the data's ("unnamed"), else its key in words ("no name"). */
export function noNameWord(words: Words | null, trans: Trans = plainTrans): string {
  return words?.noName ? trans.__(words.noName) : keyWords('no_name');
}

export function isNumber(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value);
}

/** An integer with thousands separators: 40960 -> "40,960" (the value is rounded first). */
export function formatInt(value: number): string {
  const digits = String(Math.round(Math.abs(value)));
  const sign = value < 0 && digits !== '0' ? '-' : '';
  return sign + digits.replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

/** A MiB figure without its unit: whole numbers with separators, small fractions to one decimal. */
export function formatMiBNumber(value: number): string {
  if (Number.isInteger(value) || Math.abs(value) >= 100) {
    return formatInt(value);
  }
  const fixed = (Math.round(value * 10) / 10).toFixed(1);
  return fixed.endsWith('.0') ? formatInt(value) : fixed;
}

/** "1,024 MiB". */
export function formatMiB(value: number, trans: Trans = plainTrans): string {
  return trans.__('%1 MiB', formatMiBNumber(value));
}

/** A change of memory with its sign: "+4 MiB", "−2.5 MiB", "0 MiB". */
export function formatDeltaMiB(value: number, trans: Trans = plainTrans): string {
  const rounded = Math.round(value * 10) / 10;
  if (rounded === 0) {
    return formatMiB(0, trans);
  }
  const sign = rounded > 0 ? '+' : '\u2212';
  return sign + formatMiB(Math.abs(value), trans);
}

/** A cell's duration: "10 ms", "3.1 s", "2 min 5 s". */
export function formatDuration(seconds: number, trans: Trans = plainTrans): string {
  if (seconds < 1) {
    return trans.__('%1 ms', formatInt(seconds * 1000));
  }
  if (seconds < 60) {
    return trans.__('%1 s', (Math.round(seconds * 10) / 10).toFixed(1));
  }
  const whole = Math.round(seconds);
  return trans.__('%1 min %2 s', formatInt(Math.floor(whole / 60)), String(whole % 60));
}

/**
 * One value as text. NA becomes "n/a" with its reason as the tooltip; a number goes through `format`;
 * a missing value (null/undefined) becomes `missing` (the data's word for it unless told); anything else is a bug of the
 * answer and says so rather than printing [object Object].
 */
export function show(
  value: unknown,
  format: (value: number) => string = formatInt,
  trans: Trans = plainTrans,
  missing?: string,
  words: Words | null = null
): Shown {
  if (isNA(value)) {
    return { text: missingWord(words, trans), title: naReason(value, trans, words), na: true };
  }
  if (isNumber(value)) {
    return { text: format(value), title: '', na: false };
  }
  if (typeof value === 'string') {
    return { text: value, title: '', na: false };
  }
  if (value === null || value === undefined) {
    return { text: missing ?? missingWord(words, trans), title: '', na: true };
  }
  return { text: missingWord(words, trans), title: trans.__('unexpected value from the server'), na: true };
}

/** A used-of-total memory figure as a bar: text "30,000 / 40,960 MiB (73%)", and the filled fraction (null: no bar). */
export interface MemoryBar {
  text: string;
  title: string;
  fraction: number | null;
  percent: number | null;
  na: boolean;
}

export function memoryBar(
  used: unknown,
  total: unknown,
  trans: Trans = plainTrans,
  words: Words | null = null
): MemoryBar {
  if (isNumber(used) && isNumber(total)) {
    const fraction = total > 0 ? Math.min(1, Math.max(0, used / total)) : null;
    const percent = fraction === null ? null : Math.round(fraction * 100);
    const text =
      percent === null
        ? trans.__('%1 / %2 MiB', formatInt(used), formatInt(total))
        : trans.__('%1 / %2 MiB (%3%)', formatInt(used), formatInt(total), percent);
    return { text, title: '', fraction, percent, na: false };
  }
  const u = show(used, formatInt, trans, undefined, words);
  const t = show(total, formatInt, trans, undefined, words);
  if (u.na && t.na && u.title === t.title) {
    return { text: u.text, title: u.title, fraction: null, percent: null, na: true };
  }
  return {
    text: trans.__('%1 / %2 MiB', u.text, t.text),
    title: [u.title, t.title].filter(Boolean).join('; '),
    fraction: null,
    percent: null,
    na: true
  };
}

// -- time ---------------------------------------------------------------------------------------------------

const pad2 = (n: number) => String(n).padStart(2, '0');

/** A unix time (seconds) as the browser's local clock time, "14:03:09". */
export function clockTime(unixSeconds: number): string {
  const d = new Date(unixSeconds * 1000);
  return `${pad2(d.getHours())}:${pad2(d.getMinutes())}:${pad2(d.getSeconds())}`;
}

/**
 * A span of time as coarse as a glance needs, so the text (and the sidebar's rows) change at most once a
 * minute: "< 1 min", "12 min", "3 h 5 min", "2 d 4 h".
 */
export function formatSpan(seconds: number, trans: Trans = plainTrans): string {
  const minutes = Math.floor(Math.max(0, seconds) / 60);
  if (minutes < 1) {
    return trans.__('< 1 min');
  }
  if (minutes < 60) {
    return trans.__('%1 min', minutes);
  }
  const hours = Math.floor(minutes / 60);
  if (hours < 24) {
    return minutes % 60 ? trans.__('%1 h %2 min', hours, minutes % 60) : trans.__('%1 h', hours);
  }
  const days = Math.floor(hours / 24);
  return hours % 24 ? trans.__('%1 d %2 h', days, hours % 24) : trans.__('%1 d', days);
}
