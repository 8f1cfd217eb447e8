/**
 * The out-of-memory card (issue 36): what the kernel displays under a cell that raised TensorFlow's
 * ResourceExhaustedError, as the MIME type `application/vnd.tfgpu.oom+json` (its JSON is made by
 * tfgpu_magic/core/oom.py), read and turned into the lines, figures and buttons the card shows, and the
 * question its "Restart with ..." button asks. Pure: no JupyterLab, no DOM (oomcard.ts renders what this returns).
 *
 * Bytes stay exact until shown: a figure's text is rounded to its unit, its tooltip holds the exact count.
 * No setting is named here: the suggested settings come with the data and are checked against the data's
 * setting words (words.ts) before anything is saved.
 */

import { formatInt, formatMiBNumber, isNumber, missingWord, plainTrans, Trans } from './format.js';
import { checkSettings, isPlainObject, SavedSettings, settingLines } from './saved.js';
import { SettingWords } from './words.js';

/** The card's MIME type, as the kernel's display bundle names it. */
export const OOM_MIME_TYPE = 'application/vnd.tfgpu.oom+json';

/** The schema of the card's JSON this page reads. */
export const OOM_SCHEMA = 1;

/**
 * The renderer's rank: below text/html's (50) and every other standard one, so JupyterLab renders this type
 * rather than the bundle's text/html or text/plain fallback.
 */
export const OOM_RANK = 30;

/** The `%tfgpu` line the "Free memory" button runs in the notebook's kernel. */
export const FREE_MEMORY_CODE = '%tfgpu free';

// -- the data --------------------------------------------------------------------------------------------

export interface OomAsked {
  shape: number[] | null;
  dtype: string | null;
  bytes: number | null;
  /** TensorFlow's device name: "GPU:0", "CPU:0". */
  device: string | null;
  allocator: string | null;
}

export interface OomHolder {
  notebook: string | null;
  pid: number | null;
  user: string | null;
  bytes: number | null;
  /** This notebook's own kernel. */
  mine: boolean;
  /** The kernel's words for the holder: "other.ipynb (kernel of this server)". */
  text: string;
}

export interface OomStep {
  /** A `%tfgpu` line to run, or null when the step is no magic ("a smaller batch"). */
  magic: string | null;
  why: string;
}

/** The card's JSON, read: every field of the contract, missing ones as null (or empty). */
export interface OomReport {
  schema: number;
  kind: 'gpu' | 'cpu';
  error: string;
  message: string;
  asked: OomAsked;
  /** nvidia-smi's index of the failing GPU. */
  physicalIndex: number | null;
  tfMemory: { current: number | null; peak: number | null };
  /** The settings in force, as rows: [name, value]. */
  settings: [string, string][];
  gpu: { name: string | null; total: number | null; free: number | null } | null;
  holders: OomHolder[];
  cause: string;
  steps: OomStep[];
  /** Settings (name -> the text after `%tfgpu <name>`) the Restart button saves; {} for none. */
  suggested: SavedSettings;
  /** The failing cell's execution count. */
  executionCount: number | null;
}

/** The card's JSON read: `ok` (`newer`: a newer schema, read for the fields this page knows), or not a card. */
export type OomRead = { kind: 'ok'; report: OomReport; newer: boolean } | { kind: 'invalid'; message: string };

const str = (value: unknown): string | null => (typeof value === 'string' && value.trim() ? value.trim() : null);
const num = (value: unknown): number | null => (isNumber(value) ? value : null);
const bytesOf = (value: unknown): number | null => (isNumber(value) && value >= 0 ? value : null);

function readAsked(raw: unknown): OomAsked {
  const a = isPlainObject(raw) ? raw : {};
  const shape =
    Array.isArray(a.shape) && a.shape.every(d => isNumber(d) && Number.isInteger(d)) ? (a.shape as number[]) : null;
  return { shape, dtype: str(a.dtype), bytes: bytesOf(a.bytes), device: str(a.device), allocator: str(a.allocator) };
}

function readHolder(raw: unknown): OomHolder | null {
  if (!isPlainObject(raw)) {
    return null;
  }
  const pid = num(raw.pid);
  const holder: OomHolder = {
    notebook: str(raw.notebook),
    pid: pid !== null && Number.isInteger(pid) ? pid : null,
    user: str(raw.user),
    bytes: bytesOf(raw.bytes),
    mine: raw.mine === true,
    text: str(raw.text) ?? ''
  };
  if (!holder.text) {
    // The kernel always names it; an older or partial answer still gets a name from its parts.
    const parts = [holder.notebook, holder.user, holder.pid !== null ? `pid ${holder.pid}` : null].filter(Boolean);
    holder.text = parts.join(', ');
  }
  return holder.text ? holder : null;
}

/** The suggested settings: names to non-empty texts (or lists of them); anything else is left out. */
function readSuggested(raw: unknown): SavedSettings {
  const out: SavedSettings = {};
  if (!isPlainObject(raw)) {
    return out;
  }
  for (const [name, value] of Object.entries(raw)) {
    if (typeof value === 'string' && value.trim()) {
      out[name] = value.trim();
    } else if (Array.isArray(value) && value.length && value.every(v => typeof v === 'string' && v.trim())) {
      out[name] = (value as string[]).map(v => v.trim());
    }
  }
  return out;
}

/** Read the card's JSON (the display bundle's `application/vnd.tfgpu.oom+json`) for its shape. */
export function readOom(raw: unknown, trans: Trans = plainTrans): OomRead {
  if (!isPlainObject(raw)) {
    return { kind: 'invalid', message: trans.__('the out-of-memory card holds no object') };
  }
  const schema = raw.schema === undefined ? OOM_SCHEMA : raw.schema;
  if (!isNumber(schema) || !Number.isInteger(schema) || schema < 1) {
    return { kind: 'invalid', message: trans.__('the out-of-memory card has schema %1, not a version', String(schema)) };
  }
  const tf = isPlainObject(raw.tf_memory) ? raw.tf_memory : {};
  const gpu = isPlainObject(raw.gpu) ? raw.gpu : null;
  const settings: [string, string][] = (Array.isArray(raw.settings) ? raw.settings : [])
    .filter(
      (row): row is [unknown, unknown] => Array.isArray(row) && row.length >= 2 && typeof row[0] === 'string'
    )
    .map(row => [String(row[0]), typeof row[1] === 'string' ? row[1] : JSON.stringify(row[1])]);
  const steps: OomStep[] = (Array.isArray(raw.steps) ? raw.steps : [])
    .filter(isPlainObject)
    .map(step => ({ magic: str(step.magic), why: str(step.why) ?? '' }))
    .filter(step => step.magic !== null || step.why !== '');
  const physical = num(raw.physical_index);
  const count = num(raw.execution_count);
  const report: OomReport = {
    schema,
    kind: raw.kind === 'cpu' ? 'cpu' : 'gpu',
    error: str(raw.error) ?? 'ResourceExhaustedError',
    message: str(raw.message) ?? '',
    asked: readAsked(raw.asked),
    physicalIndex: physical !== null && Number.isInteger(physical) ? physical : null,
    tfMemory: { current: bytesOf(tf.current_bytes), peak: bytesOf(tf.peak_bytes) },
    settings,
    gpu: gpu ? { name: str(gpu.name), total: bytesOf(gpu.total_bytes), free: bytesOf(gpu.free_bytes) } : null,
    holders: (Array.isArray(raw.holders) ? raw.holders : []).map(readHolder).filter((h): h is OomHolder => h !== null),
    cause: str(raw.cause) ?? '',
    steps,
    suggested: readSuggested(raw.suggested),
    executionCount: count !== null && Number.isInteger(count) ? count : null
  };
  return { kind: 'ok', report, newer: schema > OOM_SCHEMA };
}

// -- bytes ---------------------------------------------------------------------------------------------------

const UNITS: ((n: string, trans: Trans) => string)[] = [
  (n, trans) => trans.__('%1 KiB', n),
  (n, trans) => trans.__('%1 MiB', n),
  (n, trans) => trans.__('%1 GiB', n),
  (n, trans) => trans.__('%1 TiB', n),
  (n, trans) => trans.__('%1 PiB', n)
];

/**
 * A byte count as a person reads it, in the largest binary unit that keeps it at 1 or more: "4 TiB", "1.5 GiB",
 * "512 MiB", "800 bytes" (whole numbers and figures of 100 or more without decimals, others to one: format.ts).
 */
export function formatBytes(bytes: number, trans: Trans = plainTrans): string {
  if (Math.abs(bytes) < 1024) {
    return exactBytes(Math.round(bytes), trans);
  }
  let value = bytes;
  let unit = -1;
  while (Math.abs(value) >= 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return UNITS[unit](formatMiBNumber(value), trans);
}

/** The exact count, for a tooltip: "4,398,046,511,104 bytes". */
export function exactBytes(bytes: number, trans: Trans = plainTrans): string {
  return trans._n('%2 byte', '%2 bytes', bytes, formatInt(bytes));
}

// -- the card ------------------------------------------------------------------------------------------------

/** One line of the card's table: a label, the value's text, its tooltip (exact bytes), whether it is missing. */
export interface OomRow {
  key: string;
  label: string;
  value: string;
  title: string;
  na: boolean;
}

export interface OomHolderRow {
  key: string;
  text: string;
  figure: string;
  title: string;
  mine: boolean;
}

/** What the card shows, top to bottom. */
export interface OomView {
  /** "Out of GPU memory on GPU:0 (GPU 1)". */
  title: string;
  /** "TensorFlow could not allocate 4 TiB." */
  summary: string;
  rows: OomRow[];
  /** The heading over the holders ("Holding memory on GPU 1"); null: no holder list (host memory). */
  holdersTitle: string | null;
  holders: OomHolderRow[];
  /** Said where the list is empty. */
  holdersEmpty: string;
  cause: string;
  steps: OomStep[];
  /** TensorFlow's own line, with the error's class: for the folded details. */
  message: string;
  /** Said when the data is of a newer schema than this page reads. */
  note: string | null;
  /** The suggested settings as the button names them ("allocator async"); null: no Restart button. */
  restart: { label: string; words: string; settings: SavedSettings } | null;
}

/** A figure in bytes as a row's value: rounded text, exact tooltip; a missing one as the data's word for it. */
function bytesValue(bytes: number | null, trans: Trans): { text: string; title: string; na: boolean } {
  return bytes === null
    ? { text: missingWord(null, trans), title: '', na: true }
    : { text: formatBytes(bytes, trans), title: exactBytes(bytes, trans), na: false };
}

/** The settings as one line: "allocator async, limit 40%" (one `name value` per value). */
export function settingsWords(settings: SavedSettings): string {
  return settingLines(settings).join(', ');
}

/** The device as the sidebar names it: TensorFlow's name and nvidia-smi's number, "GPU:0 (GPU 1)". */
export function deviceText(report: OomReport, trans: Trans = plainTrans): string {
  const device = report.asked.device ?? (report.kind === 'cpu' ? 'CPU' : trans.__('a GPU'));
  return report.physicalIndex !== null && report.kind === 'gpu'
    ? trans.__('%1 (GPU %2)', device, report.physicalIndex)
    : device;
}

export function oomView(read: Extract<OomRead, { kind: 'ok' }>, trans: Trans = plainTrans): OomView {
  const report = read.report;
  const gpu = report.kind === 'gpu';
  const where = deviceText(report, trans);
  const asked = report.asked;
  const rows: OomRow[] = [];

  // What was asked: the size, then what it was (dtype, shape), then where and by which allocator.
  const size = bytesValue(asked.bytes, trans);
  const what = [
    asked.dtype,
    asked.shape ? trans.__('shape [%1]', asked.shape.join(', ')) : null
  ].filter(Boolean);
  rows.push({
    key: 'asked',
    label: trans.__('Asked'),
    value: what.length ? trans.__('%1 (%2)', size.text, what.join(', ')) : size.text,
    title: size.title,
    na: size.na && !what.length
  });
  rows.push({
    key: 'device',
    label: trans.__('On'),
    value: asked.allocator ? trans.__('%1, allocator %2', where, asked.allocator) : where,
    title: '',
    na: false
  });

  // TensorFlow's own figures in this kernel, on that device.
  const current = bytesValue(report.tfMemory.current, trans);
  const peak = bytesValue(report.tfMemory.peak, trans);
  rows.push({
    key: 'tensorflow',
    label: trans.__('TensorFlow'),
    value: trans.__('%1 in use, peak %2 (this kernel)', current.text, peak.text),
    title: [current.title && trans.__('in use: %1', current.title), peak.title && trans.__('peak: %1', peak.title)]
      .filter(Boolean)
      .join('; '),
    na: current.na && peak.na
  });

  rows.push({
    key: 'settings',
    label: trans.__('Settings'),
    value: report.settings.length
      ? report.settings.map(([name, value]) => `${name} ${value}`.trim()).join(', ')
      : trans.__("none: TensorFlow's defaults"),
    title: '',
    na: false
  });

  if (gpu) {
    const g = report.gpu;
    const total = bytesValue(g?.total ?? null, trans);
    const free = bytesValue(g?.free ?? null, trans);
    const name = g?.name ?? missingWord(null, trans);
    rows.push({
      key: 'gpu',
      label: report.physicalIndex !== null ? trans.__('GPU %1', report.physicalIndex) : trans.__('GPU'),
      value: trans.__('%1: %2 free of %3', name, free.text, total.text),
      title: [free.title && trans.__('free: %1', free.title), total.title && trans.__('total: %1', total.title)]
        .filter(Boolean)
        .join('; '),
      na: !g
    });
  }

  const holders: OomHolderRow[] = report.holders.map((h, i) => {
    const bytes = h.bytes === null ? null : bytesValue(h.bytes, trans);
    return {
      key: `holder-${i}`,
      text: h.text, // the kernel's words, "this kernel" among them; the card sets its own in bold
      figure: bytes ? bytes.text : '',
      title: bytes ? bytes.title : '',
      mine: h.mine
    };
  });

  const suggested = report.suggested;
  const words = settingsWords(suggested);
  return {
    title: gpu ? trans.__('Out of GPU memory on %1', where) : trans.__('Out of host memory on %1', where),
    summary:
      asked.bytes !== null
        ? trans.__('TensorFlow could not allocate %1.', formatBytes(asked.bytes, trans))
        : trans.__('TensorFlow could not allocate the memory it asked for.'),
    rows,
    holdersTitle: gpu
      ? report.physicalIndex !== null
        ? trans.__('Holding memory on GPU %1', report.physicalIndex)
        : trans.__('Holding memory on this GPU')
      : null,
    holders,
    holdersEmpty: trans.__('no other process'),
    cause: report.cause,
    steps: report.steps,
    message: [report.error, report.message].filter(Boolean).join(': '),
    note: read.newer
      ? trans.__('Written by a newer tfgpu_magic (schema %1): this page shows what it knows of it.', report.schema)
      : null,
    restart: words ? { label: trans.__('Restart with %1', words), words, settings: suggested } : null
  };
}

// -- the buttons -----------------------------------------------------------------------------------------

/**
 * The settings to save for "Restart with ...": the notebook's saved ones (`saved`, {} when none) with the
 * suggested ones over them, checked against the setting words. `added`: only the suggested ones that change
 * something; `kept`: the saved ones that stay as they were.
 */
export function restartSettings(
  saved: SavedSettings,
  suggested: SavedSettings,
  words: SettingWords,
  trans: Trans = plainTrans
): { ok: true; settings: SavedSettings; kept: SavedSettings } | { ok: false; message: string } {
  const checked = checkSettings({ ...saved, ...suggested }, words, trans);
  if (!checked.ok) {
    return { ok: false, message: checked.message };
  }
  const kept: SavedSettings = {};
  for (const [name, value] of Object.entries(checked.settings)) {
    if (!(name in suggested)) {
      kept[name] = value;
    }
  }
  return { ok: true, settings: checked.settings, kept };
}

/**
 * Where the failing cell is, for the question: the positions (1-based) of the code cells above it, and its own
 * position. `kinds`: the notebook's cell types in order; `failing`: the failing cell's index there.
 */
export interface CellsAbove {
  /** 1-based positions of the code cells above the failing one. */
  code: number[];
  /** The failing cell's 1-based position. */
  failing: number;
}

export function cellsAbove(kinds: readonly string[], failing: number): CellsAbove {
  const code: number[] = [];
  for (let i = 0; i < Math.min(failing, kinds.length); i++) {
    if (kinds[i] === 'code') {
      code.push(i + 1);
    }
  }
  return { code, failing: failing + 1 };
}

/** "cell 3", "cells 1–4" (the span from the first code cell above to the last). */
export function cellsText(positions: readonly number[], trans: Trans = plainTrans): string {
  if (!positions.length) {
    return '';
  }
  const first = positions[0];
  const last = positions[positions.length - 1];
  return first === last ? trans.__('cell %1', first) : trans.__('cells %1–%2', first, last);
}

/** The confirmation of "Restart with ...": its title, its paragraphs, and the accept button's label. */
export interface RestartQuestion {
  title: string;
  body: string[];
  accept: string;
}

export function restartQuestion(
  suggested: SavedSettings,
  kept: SavedSettings,
  cells: CellsAbove,
  trans: Trans = plainTrans
): RestartQuestion {
  const words = settingsWords(suggested);
  const body = [
    trans.__(
      '%1 is saved in this notebook and applied at every start of its kernel, before any cell.',
      words
    )
  ];
  const others = settingsWords(kept);
  if (others) {
    body.push(trans.__('Its other saved settings apply too: %1.', others));
  }
  body.push(trans.__("The kernel restarts: its variables are lost."));
  const count = cells.code.length;
  if (count) {
    body.push(
      trans._n(
        'Then %2 above the failing one runs again (%1 code cell); it may have side effects.',
        'Then %2 above the failing one run again (%1 code cells); they may have side effects.',
        count,
        cellsText(cells.code, trans)
      )
    );
    body.push(trans.__('The failing cell (cell %1) does not run.', cells.failing));
  } else {
    body.push(trans.__('No cell runs again: there is no code cell above the failing one.'));
  }
  return {
    title: trans.__('Restart the kernel with %1?', words),
    body,
    accept: count ? trans.__('Restart and run %1', cellsText(cells.code, trans)) : trans.__('Restart')
  };
}

/** What the card says once "Restart with ..." has run the cells above (or could not). */
export function restartDoneText(words: string, cells: CellsAbove, ran: boolean, trans: Trans = plainTrans): string {
  if (!cells.code.length) {
    return trans.__('Kernel restarted with %1.', words);
  }
  return ran
    ? trans.__('Kernel restarted with %1; %2 ran again.', words, cellsText(cells.code, trans))
    : trans.__('Kernel restarted with %1; a cell above failed again: see its output.', words);
}
