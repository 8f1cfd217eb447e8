/**
 * The kernel comm ("This notebook"): where the link to the kernel stands, merging the comm's messages, and
 * the rows built from the kernel's sections (settings, devices, cells, placement) into `notebookView`.
 */

import {
  formatDeltaMiB,
  formatDuration,
  formatMiB,
  isNA,
  isNumber,
  missingWord,
  naReason,
  plainTrans,
  Trans
} from './format.js';
import { keyWords, readSettingWords, readWords, SettingWords, Words } from './words.js';

// -- the kernel comm ("This notebook") ---------------------------------------------------------------------

/**
 * Where the link to one notebook's kernel stands (see comm.ts):
 * - `starting`: the notebook's kernel session is not ready yet;
 * - `no-kernel`: the notebook has no kernel;
 * - `connecting`: the comm is open, the kernel has not answered yet (it may be busy with a cell);
 * - `connected`: the kernel's state arrived;
 * - `not-loaded`: the kernel closed the comm before any message: `%load_ext tfgpu_magic` has not run;
 * - `closed`: the kernel closed the comm after answering (the extension was unloaded);
 * - `loading`: the "Load tfgpu_magic" cell is running;
 * - `restarting`, `dead`: the kernel's own states.
 */
export type LinkStatus =
  | 'starting'
  | 'no-kernel'
  | 'connecting'
  | 'connected'
  | 'not-loaded'
  | 'closed'
  | 'loading'
  | 'restarting'
  | 'dead';

/** The status line of the "This notebook" section, and whether it offers the "Load tfgpu_magic" button. */
export function linkMessage(status: LinkStatus, trans: Trans = plainTrans): { text: string; level: Level; canLoad: boolean } {
  switch (status) {
    case 'starting':
      return { text: trans.__('Waiting for the kernel…'), level: 'info', canLoad: false };
    case 'no-kernel':
      return { text: trans.__('This notebook has no kernel.'), level: 'info', canLoad: false };
    case 'connecting':
      return {
        text: trans.__('Asking the kernel… (a busy kernel answers when its cell ends)'),
        level: 'info',
        canLoad: false
      };
    case 'connected':
      return { text: '', level: 'ok', canLoad: false };
    case 'not-loaded':
      return { text: trans.__('tfgpu_magic is not loaded in this kernel.'), level: 'warn', canLoad: true };
    case 'closed':
      return {
        text: trans.__('The kernel closed the connection (tfgpu_magic unloaded?).'),
        level: 'warn',
        canLoad: true
      };
    case 'loading':
      return { text: trans.__('Loading tfgpu_magic…'), level: 'info', canLoad: false };
    case 'restarting':
      return { text: trans.__('The kernel is restarting…'), level: 'warn', canLoad: false };
    case 'dead':
      return { text: trans.__('The kernel is dead; restart it.'), level: 'error', canLoad: false };
    default:
      return { text: String(status), level: 'info', canLoad: false };
  }
}

/** The kernel's sections as last merged: kernel, memory, cells, placement, error (and any others it adds). */
export type Sections = { [name: string]: any };

/**
 * Merge one comm message: `{type: 'state', sections}` replaces everything, `{type: 'changes', sections}`
 * replaces only the sections it carries. Anything else leaves the sections as they were.
 */
export function mergeMessage(previous: Sections | null, data: unknown): Sections | null {
  if (typeof data !== 'object' || data === null) {
    return previous;
  }
  const { type, sections } = data as { type?: unknown; sections?: unknown };
  if (typeof sections !== 'object' || sections === null || Array.isArray(sections)) {
    return previous;
  }
  if (type === 'state') {
    return { ...(sections as Sections) };
  }
  if (type === 'changes') {
    return { ...(previous ?? {}), ...(sections as Sections) };
  }
  return previous;
}

/**
 * The words a comm message carries (a `state` message has the kernel's `words`): `undefined` when the message
 * says nothing of them (a `changes` message: keep the last), null when a `state` has none (an older kernel).
 */
export function messageWords(data: unknown): Words | null | undefined {
  if (typeof data !== 'object' || data === null || (data as { type?: unknown }).type !== 'state') {
    return undefined;
  }
  return readWords((data as { words?: unknown }).words);
}

/**
 * The settings a comm message names (a `state` message has the kernel's `setting_words`): `undefined` when the
 * message says nothing of them (keep the last), null when a `state` has none (an older kernel).
 */
export function messageSettingWords(data: unknown): SettingWords | null | undefined {
  if (typeof data !== 'object' || data === null || (data as { type?: unknown }).type !== 'state') {
    return undefined;
  }
  return readSettingWords((data as { setting_words?: unknown }).setting_words);
}

export type Level = 'ok' | 'info' | 'warn' | 'error';

const LEVELS: ReadonlySet<string> = new Set(['ok', 'info', 'warn', 'error']);

export interface SettingRow {
  key: string;
  setting: string;
  asked: string;
  status: string;
  detail: string;
  level: Level;
}

export interface DeviceRow {
  key: string;
  name: string;
  /** "GPU 1" (nvidia-smi's number) for a GPU whose physical index is known, else "". */
  physical: string;
  /** "4 MiB (peak 4 MiB)", or "". */
  memory: string;
  note: string;
}

export interface CellRow {
  key: string;
  label: string;
  duration: string;
  success: boolean;
  /** "CPU:0 +4 MiB, peak 4 MiB" per allocator. */
  devices: string[];
  title: string;
}

export interface PlacementRow {
  key: string;
  cell: string;
  opType: string;
  device: string;
  title: string;
}

export interface PlacementView {
  /** "last 5 of 37 placements", "no placement logged yet" ... */
  summary: string;
  rows: PlacementRow[];
  notes: string[];
}

export interface NotebookView {
  /** False until the kernel's `kernel` section arrived (the extension is not loaded, or not yet answering). */
  connected: boolean;
  /** "TensorFlow 2.21.0: runtime initialized". */
  tensorflow: string;
  tensorflowNote: string;
  /** Why TensorFlow sees no GPU while NVML lists some, with the fix (the kernel's sentence, as every view says it). */
  noGpu: string;
  /** "kernel pid 22484 · tfgpu_magic 0.1.0". */
  kernel: string;
  settings: SettingRow[];
  settingsEmpty: string;
  devices: DeviceRow[];
  devicesNote: string;
  cells: CellRow[];
  cellsNote: string;
  placement: PlacementView | null;
  notes: string[];
  error: string | null;
}

/** A kernel-section value as plain text: "" when missing, the reason when NA. */
export function text(value: unknown, trans: Trans, words: Words | null = null): string {
  if (value === null || value === undefined) {
    return '';
  }
  if (typeof value === 'string') {
    return value;
  }
  if (isNumber(value) || typeof value === 'boolean') {
    return String(value);
  }
  if (isNA(value)) {
    return naReason(value, trans, words);
  }
  return trans.__('unexpected value');
}

/** TensorFlow's state (as the kernel names it, "not_imported") in the kernel's words. */
export function tfStateWords(state: string, trans: Trans = plainTrans, words: Words | null = null): string {
  const known = words?.tfStates[state];
  return known ? trans.__(known) : keyWords(state);
}

/**
 * A setting's status (as the kernel names it, "no_gpu") in the kernel's words, with the level for its colour;
 * without the kernel's words, the key itself at level info.
 */
export function statusWords(
  status: string,
  trans: Trans = plainTrans,
  words: Words | null = null
): { words: string; level: Level } {
  const known = words?.settingStates[status];
  if (known) {
    return { words: trans.__(known.words), level: LEVELS.has(known.level) ? (known.level as Level) : 'info' };
  }
  return { words: keyWords(status), level: 'info' };
}

/** The settings table: setting, asked, status (in words, with a level for its colour), detail. */
export function settingRows(
  kernel: Sections | null | undefined,
  trans: Trans = plainTrans,
  words: Words | null = null
): SettingRow[] {
  const settings = kernel && Array.isArray(kernel.settings) ? kernel.settings : [];
  return settings.map((s: any, i: number) => {
    const status = statusWords(text(s?.status, trans), trans, words);
    return {
      key: `${text(s?.setting, trans)}-${i}`,
      setting: text(s?.setting, trans),
      asked: text(s?.asked, trans),
      status: status.words,
      detail: text(s?.detail, trans, words),
      level: status.level
    };
  });
}

/** TensorFlow's logical devices, each with its allocator's memory where the memory section has it. */
export function deviceRows(
  kernel: Sections | null | undefined,
  memory: Sections | null | undefined,
  trans: Trans = plainTrans,
  words: Words | null = null
): { rows: DeviceRow[]; note: string } {
  const tf = (kernel && kernel.tensorflow) || {};
  const logical: any[] | null = Array.isArray(tf.logical_devices) ? tf.logical_devices : null;
  const allocators: any[] = memory && Array.isArray(memory.devices) ? memory.devices : [];
  const byName = new Map<string, any>(allocators.map(m => [text(m?.device, trans), m]));
  const memoryText = (m: any): string => {
    if (!m || !isNumber(m.current_mib)) {
      return m ? missingWord(words, trans) : '';
    }
    return isNumber(m.peak_mib)
      ? trans.__('%1 (peak %2)', formatMiB(m.current_mib, trans), formatMiB(m.peak_mib, trans))
      : formatMiB(m.current_mib, trans);
  };
  const rows: DeviceRow[] = [];
  const seen = new Set<string>();
  for (const d of logical ?? []) {
    const name = text(d?.name, trans);
    seen.add(name);
    const m = byName.get(name);
    rows.push({
      key: `logical-${name}`,
      name,
      physical: isNumber(d?.physical_index) ? trans.__('GPU %1', d.physical_index) : '',
      memory: memoryText(m),
      note: m ? text(m.note, trans) : ''
    });
  }
  for (const [name, m] of byName) {
    if (!seen.has(name)) {
      rows.push({ key: `memory-${name}`, name, physical: '', memory: memoryText(m), note: text(m?.note, trans) });
    }
  }
  let note = '';
  if (logical === null) {
    const state = text(tf.state, trans);
    note =
      state === 'imported' || state === 'enumerated'
        ? trans.__("Logical devices appear when TensorFlow's runtime starts (its first operation).")
        : state === 'initialized'
          ? ''
          : trans.__('Devices appear once TensorFlow is imported.');
  } else if (!logical.length) {
    note = trans.__('TensorFlow lists no logical device.');
  }
  return { rows, note };
}

/** The last `count` cells TensorFlow ran, oldest first: number, duration, and per allocator its change and peak. */
export function cellRows(cells: unknown, count = 5, trans: Trans = plainTrans, words: Words | null = null): CellRow[] {
  if (!Array.isArray(cells)) {
    return [];
  }
  return cells.slice(-count).map((c: any, i: number) => {
    const label = trans.__('[%1]', isNumber(c?.cell) ? c.cell : missingWord(words, trans));
    const devices = (Array.isArray(c?.devices) ? c.devices : []).map((d: any) => {
      const delta = isNumber(d?.delta_mib) ? formatDeltaMiB(d.delta_mib, trans) : missingWord(words, trans);
      const peak = isNumber(d?.peak_mib) ? formatMiB(d.peak_mib, trans) : missingWord(words, trans);
      return trans.__('%1 %2, peak %3', text(d?.device, trans), delta, peak);
    });
    const notes = [];
    if (c?.started_runtime) {
      notes.push(trans.__("This cell started TensorFlow's runtime."));
    }
    if (c?.success === false) {
      notes.push(trans.__('This cell failed.'));
    }
    return {
      key: `cell-${text(c?.cell, trans)}-${i}`,
      label,
      duration: isNumber(c?.duration_s) ? formatDuration(c.duration_s, trans) : '',
      success: c?.success !== false,
      devices,
      title: notes.join('\n')
    };
  });
}

/** The tail of the placement log: op type -> device, the newest last. */
export function placementView(placement: unknown, count = 8, trans: Trans = plainTrans): PlacementView | null {
  if (typeof placement !== 'object' || placement === null) {
    return null;
  }
  const p = placement as Sections;
  const records: any[] = Array.isArray(p.records) ? p.records : [];
  const total = isNumber(p.total) ? p.total : records.length;
  const status = (p.status && typeof p.status === 'object' ? p.status : {}) as Sections;
  const notes = Array.isArray(status.notes) ? status.notes.map((n: unknown) => text(n, trans)).filter(Boolean) : [];
  const tail = records.slice(-count);
  const rows = tail.map((r: any, i: number) => ({
    key: `placement-${total - tail.length + i}`,
    cell: isNumber(r?.cell) ? trans.__('[%1]', r.cell) : '',
    opType: text(r?.op_type, trans),
    device: text(r?.short_device ?? r?.device, trans),
    title: [text(r?.op, trans), text(r?.device, trans), text(r?.channel, trans)].filter(Boolean).join(' · ')
  }));
  let summary: string;
  if (!rows.length) {
    summary =
      status.on === false
        ? trans.__('Placement log off (%tfgpu placement on starts it).')
        : trans.__('No placement logged yet.');
  } else {
    summary = trans._n('last %2 of %1 placement', 'last %2 of %1 placements', total, rows.length);
    if (status.on === false) {
      summary = trans.__('%1; the log is off now', summary);
    }
  }
  return { summary, rows, notes };
}

/**
 * Everything the "This notebook" section shows, from the merged sections (null: nothing received), with the
 * kernel's words for states and missing values (`messageWords` of its last state message).
 */
export function notebookView(
  sections: Sections | null,
  trans: Trans = plainTrans,
  words: Words | null = null
): NotebookView {
  const s = sections ?? {};
  const kernel = s.kernel && typeof s.kernel === 'object' ? (s.kernel as Sections) : null;
  const view: NotebookView = {
    connected: kernel !== null,
    tensorflow: '',
    tensorflowNote: '',
    noGpu: '',
    kernel: '',
    settings: [],
    settingsEmpty: '',
    devices: [],
    devicesNote: '',
    cells: [],
    cellsNote: '',
    placement: null,
    notes: [],
    error: null
  };
  const error = s.error;
  if (error && typeof error === 'object') {
    view.error = text(error.message, trans) || trans.__('The kernel reported an error.');
  } else if (typeof error === 'string' && error) {
    view.error = error;
  }
  if (!kernel) {
    return view;
  }
  const tf = (kernel.tensorflow && typeof kernel.tensorflow === 'object' ? kernel.tensorflow : {}) as Sections;
  const state = tfStateWords(text(tf.state, trans), trans, words);
  view.tensorflow = tf.version
    ? trans.__('TensorFlow %1: %2', text(tf.version, trans), state)
    : trans.__('TensorFlow: %1', state);
  view.tensorflowNote = text(tf.note, trans);
  view.noGpu = text(tf.no_gpu, trans);
  const parts = [];
  if (isNumber(kernel.pid)) {
    parts.push(trans.__('kernel pid %1', kernel.pid));
  }
  if (kernel.tfgpu_version) {
    parts.push(trans.__('tfgpu_magic %1', text(kernel.tfgpu_version, trans)));
  }
  view.kernel = parts.join(' · ');
  view.settings = settingRows(kernel, trans, words);
  view.settingsEmpty = view.settings.length ? '' : trans.__('No setting asked (%tfgpu help lists them).');
  const devices = deviceRows(kernel, s.memory, trans, words);
  view.devices = devices.rows;
  view.devicesNote = devices.note;
  view.cells = cellRows(s.cells, 5, trans, words);
  if (!view.cells.length) {
    view.cellsNote = trans.__("Per-cell memory appears once TensorFlow's runtime runs.");
  }
  view.placement = placementView(s.placement, 8, trans);
  const notes = Array.isArray(kernel.notes) ? kernel.notes.map((n: unknown) => text(n, trans)) : [];
  const numbering = kernel.numbering && typeof kernel.numbering === 'object' ? kernel.numbering : {};
  if (numbering.note) {
    notes.push(text(numbering.note, trans));
  }
  view.notes = notes.filter(Boolean);
  return view;
}
