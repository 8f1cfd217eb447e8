/**
 * The sidebar's pure model: it turns the server's GET tfgpu/api/gpus answer and the kernel comm's
 * messages into the rows the sidebar shows. It imports nothing (no JupyterLab, no DOM), so
 * `node --test` runs it as is; the widget code only renders what these functions return.
 *
 * Every sentence passes through a `Trans` (JupyterLab's TranslationBundle has this shape), so a
 * language pack translates the sidebar; the tests use `plainTrans`, which only fills placeholders.
 */

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

/** Why a value is missing, in words: the server's detail, or else the kind of failure. */
export function naReason(value: NA, trans: Trans = plainTrans): string {
  if (typeof value.detail === 'string' && value.detail.trim()) {
    return value.detail;
  }
  switch (value.unavailable) {
    case 'not_supported':
      return trans.__('not supported by this GPU or driver');
    case 'no_permission':
      return trans.__('no permission to read it');
    case 'gpu_lost':
      return trans.__('the GPU is lost');
    case 'function_not_found':
      return trans.__('the driver lacks this function');
    default:
      return trans.__('NVML reported an error');
  }
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

const NA_TEXT = (trans: Trans) => trans.__('n/a');

/**
 * One value as text. NA becomes "n/a" with its reason as the tooltip; a number goes through `format`;
 * a missing value (null/undefined) becomes `missing` ("n/a" unless told); anything else is a bug of the
 * answer and says so rather than printing [object Object].
 */
export function show(
  value: unknown,
  format: (value: number) => string = formatInt,
  trans: Trans = plainTrans,
  missing?: string
): Shown {
  if (isNA(value)) {
    return { text: NA_TEXT(trans), title: naReason(value, trans), na: true };
  }
  if (isNumber(value)) {
    return { text: format(value), title: '', na: false };
  }
  if (typeof value === 'string') {
    return { text: value, title: '', na: false };
  }
  if (value === null || value === undefined) {
    return { text: missing ?? NA_TEXT(trans), title: '', na: true };
  }
  return { text: NA_TEXT(trans), title: trans.__('unexpected value from the server'), na: true };
}

// -- the server's answer (GET tfgpu/api/gpus) ------------------------------------------------------------

export interface SessionInfo {
  path: string;
  name: string;
  type: string;
}

export interface ProcessKernel {
  id: string;
  name: string;
  execution_state: string;
  relation: 'kernel' | 'child' | string;
  sessions: SessionInfo[];
}

export interface GpuProcess {
  pid: number | NA;
  used_mib: number | null | NA;
  name: string | null | NA;
  user: string | null | NA;
  kernel: ProcessKernel | null;
}

export interface GpuInfo {
  index: number | NA;
  name: string | NA;
  memory_total_mib: number | NA;
  memory_used_mib: number | NA;
  utilization_gpu_pct: number | NA;
  temperature_c: number | NA;
  error: NA | null;
  processes: GpuProcess[] | NA;
  hidden_processes: { count: number; used_mib: number | null | NA } | null;
  kernel_note: string;
  [other: string]: unknown;
}

export interface GpusAnswer {
  schema?: number;
  taken_at?: number;
  nvml: {
    available: boolean;
    error: NA | null;
    driver_version?: string | NA | null;
    cuda_driver_version?: string | NA | null;
  };
  gpus: GpuInfo[];
  kernels?: unknown[];
  kernel_note?: string;
  [other: string]: unknown;
}

/** The notebook in front of the user, to mark its row. */
export interface FrontNotebook {
  path?: string | null;
  kernelId?: string | null;
}

/** A GPU's memory as a bar: text "30,000 / 40,960 MiB (73%)", and the filled fraction (null: no bar). */
export interface MemoryBar {
  text: string;
  title: string;
  fraction: number | null;
  percent: number | null;
  na: boolean;
}

/** One notebook (one kernel) using a GPU, with the memory of all its processes on that GPU. */
export interface NotebookGroup {
  key: string;
  label: string;
  /** The notebook to open on a click; null when the kernel has no notebook (a console, a bare kernel). */
  openPath: string | null;
  kernelId: string;
  kernelName: string;
  executionState: string;
  usedMib: number | null;
  memory: Shown;
  isFront: boolean;
  /** "" or the words that mark the notebook in front. */
  mark: string;
  title: string;
}

/** A process on a GPU that belongs to no kernel of this server. */
export interface OtherProcessRow {
  key: string;
  name: Shown;
  pid: Shown;
  user: Shown;
  memory: Shown;
  title: string;
}

export interface GpuRow {
  key: string;
  heading: Shown;
  /** Why the whole GPU could not be read; the row then shows this instead of figures. */
  error: string | null;
  memory: MemoryBar;
  utilization: Shown;
  temperature: Shown;
  notebooks: NotebookGroup[];
  others: OtherProcessRow[];
  /** Why there is no process list (NVML gave none), or null. */
  processesMissing: string | null;
  /** "2 processes of other users, 512 MiB", or null. */
  hidden: string | null;
  kernelNote: string;
}

export interface ServerView {
  /** Why there are no GPU figures at all (NVML missing or failing, an unexpected answer), or null. */
  problem: string | null;
  /** "Driver 550.54.15 · CUDA 12.4", or "". */
  driver: string;
  gpus: GpuRow[];
  /** Set when NVML works but lists no GPU. */
  empty: string | null;
  kernelNote: string;
}

function memoryBar(gpu: GpuInfo, trans: Trans): MemoryBar {
  const used = gpu.memory_used_mib;
  const total = gpu.memory_total_mib;
  if (isNumber(used) && isNumber(total)) {
    const fraction = total > 0 ? Math.min(1, Math.max(0, used / total)) : null;
    const percent = fraction === null ? null : Math.round(fraction * 100);
    const text =
      percent === null
        ? trans.__('%1 / %2 MiB', formatInt(used), formatInt(total))
        : trans.__('%1 / %2 MiB (%3%)', formatInt(used), formatInt(total), percent);
    return { text, title: '', fraction, percent, na: false };
  }
  const u = show(used, formatInt, trans);
  const t = show(total, formatInt, trans);
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

function preferredSession(sessions: SessionInfo[]): SessionInfo | null {
  return sessions.find(s => s.type === 'notebook') ?? sessions[0] ?? null;
}

function relationWords(relation: string, trans: Trans): string {
  return relation === 'kernel' ? trans.__('the kernel') : trans.__('a child process of the kernel');
}

/** Group one GPU's processes by kernel (one row per notebook), summing their memory on that GPU. */
export function groupByNotebook(
  processes: GpuProcess[],
  front: FrontNotebook | null = null,
  trans: Trans = plainTrans
): { notebooks: NotebookGroup[]; others: OtherProcessRow[] } {
  interface Acc {
    kernel: ProcessKernel;
    used: number;
    unknown: number;
    pids: string[];
    order: number;
  }
  const byKernel = new Map<string, Acc>();
  const others: OtherProcessRow[] = [];
  processes.forEach((proc, order) => {
    const kernel = proc && proc.kernel;
    if (kernel && typeof kernel.id === 'string') {
      let acc = byKernel.get(kernel.id);
      if (!acc) {
        acc = { kernel, used: 0, unknown: 0, pids: [], order };
        byKernel.set(kernel.id, acc);
      }
      if (isNumber(proc.used_mib)) {
        acc.used += proc.used_mib;
      } else {
        acc.unknown += 1;
      }
      acc.pids.push(
        trans.__('pid %1 (%2)', show(proc.pid, String, trans).text, relationWords(kernel.relation, trans))
      );
      return;
    }
    if (!proc) {
      return;
    }
    const pid = show(proc.pid, String, trans);
    const name = show(proc.name, String, trans, trans.__('unknown process'));
    const user = show(proc.user, String, trans, trans.__('unknown user'));
    const memory = show(proc.used_mib, v => formatMiB(v, trans), trans, trans.__('unknown'));
    others.push({
      key: `pid-${pid.text}-${others.length}`,
      name,
      pid,
      user,
      memory,
      title: [name.title, user.title, memory.title].filter(Boolean).join('; ')
    });
  });

  const notebooks: NotebookGroup[] = [];
  for (const [id, acc] of byKernel) {
    const sessions = Array.isArray(acc.kernel.sessions) ? acc.kernel.sessions : [];
    const preferred = preferredSession(sessions);
    const label = sessions.length ? sessions.map(s => s.path).join(', ') : acc.kernel.name;
    const known = acc.pids.length - acc.unknown;
    let memory: Shown;
    let usedMib: number | null;
    if (known === 0) {
      usedMib = null;
      memory = { text: trans.__('unknown'), title: trans.__('NVML gives no memory figure for its processes'), na: true };
    } else if (acc.unknown > 0) {
      usedMib = acc.used;
      memory = {
        text: trans.__('at least %1', formatMiB(acc.used, trans)),
        title: trans._n(
          '%1 of its processes has no memory figure',
          '%1 of its processes have no memory figure',
          acc.unknown
        ),
        na: false
      };
    } else {
      usedMib = acc.used;
      memory = { text: formatMiB(acc.used, trans), title: '', na: false };
    }
    const isFront =
      front !== null &&
      ((!!front.kernelId && front.kernelId === id) ||
        (!!front.path && sessions.some(s => s.path === front.path)));
    const titleLines = [
      trans.__('Kernel %1 (%2)', acc.kernel.name, acc.kernel.execution_state),
      ...acc.pids
    ];
    if (!sessions.length) {
      titleLines.push(trans.__('This kernel has no notebook or console open.'));
    }
    notebooks.push({
      key: id,
      label,
      openPath: preferred && preferred.type === 'notebook' ? preferred.path : null,
      kernelId: id,
      kernelName: acc.kernel.name,
      executionState: acc.kernel.execution_state,
      usedMib,
      memory,
      isFront,
      mark: isFront ? trans.__('this notebook') : '',
      title: titleLines.join('\n')
    });
  }
  // The biggest users first; equal ones in NVML's order.
  const order = new Map([...byKernel].map(([id, acc]) => [id, acc.order]));
  notebooks.sort((a, b) => (b.usedMib ?? -1) - (a.usedMib ?? -1) || order.get(a.key)! - order.get(b.key)!);
  return { notebooks, others };
}

/** "2 processes of other users, 512 MiB". */
export function hiddenSummary(
  hidden: GpuInfo['hidden_processes'],
  trans: Trans = plainTrans
): string | null {
  if (!hidden || !isNumber(hidden.count) || hidden.count <= 0) {
    return null;
  }
  const memory = isNumber(hidden.used_mib) ? formatMiB(hidden.used_mib, trans) : trans.__('memory unknown');
  return trans._n(
    '%1 process of other users, %2',
    '%1 processes of other users, %2',
    hidden.count,
    memory
  );
}

/** One GPU of the answer as a row. */
export function gpuRow(gpu: GpuInfo, front: FrontNotebook | null = null, trans: Trans = plainTrans): GpuRow {
  const index = show(gpu.index, String, trans);
  const name = show(gpu.name, String, trans);
  const heading: Shown = {
    text: trans.__('GPU %1 · %2', index.text, name.text),
    title: [index.title, name.title].filter(Boolean).join('; '),
    na: index.na || name.na
  };
  const error = isNA(gpu.error) ? naReason(gpu.error, trans) : null;
  const processes = gpu.processes;
  let grouped: { notebooks: NotebookGroup[]; others: OtherProcessRow[] } = { notebooks: [], others: [] };
  let processesMissing: string | null = null;
  if (Array.isArray(processes)) {
    grouped = groupByNotebook(processes, front, trans);
  } else if (isNA(processes)) {
    processesMissing = naReason(processes, trans);
  } else if (processes !== undefined && processes !== null) {
    processesMissing = trans.__('unexpected value from the server');
  }
  return {
    key: `gpu-${index.text}`,
    heading,
    error,
    memory: memoryBar(gpu, trans),
    utilization: show(gpu.utilization_gpu_pct, v => trans.__('%1%', formatInt(v)), trans),
    temperature: show(gpu.temperature_c, v => trans.__('%1 °C', formatInt(v)), trans),
    notebooks: grouped.notebooks,
    others: grouped.others,
    processesMissing,
    hidden: hiddenSummary(gpu.hidden_processes, trans),
    kernelNote: typeof gpu.kernel_note === 'string' ? gpu.kernel_note : ''
  };
}

/** The whole "All GPUs" section from the server's answer. */
export function serverView(data: unknown, front: FrontNotebook | null = null, trans: Trans = plainTrans): ServerView {
  const answer = data as GpusAnswer;
  const view: ServerView = { problem: null, driver: '', gpus: [], empty: null, kernelNote: '' };
  if (typeof data !== 'object' || data === null || typeof answer.nvml !== 'object' || answer.nvml === null) {
    view.problem = trans.__('The server gave an answer the sidebar does not understand.');
    return view;
  }
  view.kernelNote = typeof answer.kernel_note === 'string' ? answer.kernel_note : '';
  const nvml = answer.nvml;
  if (!nvml.available || isNA(nvml.error)) {
    const reason = isNA(nvml.error) ? naReason(nvml.error, trans) : trans.__('NVML is not available on this server');
    view.problem = trans.__('No GPU figures: %1', reason);
    return view;
  }
  const driver = show(nvml.driver_version, String, trans);
  const cuda = show(nvml.cuda_driver_version, String, trans);
  view.driver = trans.__('Driver %1 · CUDA %2', driver.text, cuda.text);
  if (!Array.isArray(answer.gpus)) {
    view.problem = trans.__('The server gave an answer the sidebar does not understand.');
    return view;
  }
  view.gpus = answer.gpus.map(gpu => gpuRow(gpu, front, trans));
  if (!view.gpus.length) {
    view.empty = trans.__('NVML sees no GPU on this server.');
  }
  return view;
}

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

export type Level = 'ok' | 'info' | 'warn' | 'error';

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

function text(value: unknown, trans: Trans): string {
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
    return naReason(value, trans);
  }
  return trans.__('unexpected value');
}

function stateWords(state: string, trans: Trans): string {
  switch (state) {
    case 'not_installed':
      return trans.__('not installed');
    case 'not_imported':
      return trans.__('not imported yet');
    case 'importing':
      return trans.__('importing');
    case 'imported':
      return trans.__('imported');
    case 'enumerated':
      return trans.__('imported, devices listed');
    case 'initialized':
      return trans.__('runtime initialized');
    default:
      return state.replace(/_/g, ' ');
  }
}

function statusWords(status: string, trans: Trans): { words: string; level: Level } {
  switch (status) {
    case 'applied':
      return { words: trans.__('applied'), level: 'ok' };
    case 'unchanged':
      return { words: trans.__('already in force'), level: 'ok' };
    case 'pending':
      return { words: trans.__('waiting for import'), level: 'info' };
    case 'no_gpu':
      return { words: trans.__('no GPU to apply to'), level: 'warn' };
    case 'refused':
      return { words: trans.__('refused'), level: 'error' };
    case 'no_device':
      return { words: trans.__('no such device'), level: 'error' };
    case 'failed':
      return { words: trans.__('failed'), level: 'error' };
    default:
      return { words: status.replace(/_/g, ' '), level: 'info' };
  }
}

/** The settings table: setting, asked, status (in words, with a level for its colour), detail. */
export function settingRows(kernel: Sections | null | undefined, trans: Trans = plainTrans): SettingRow[] {
  const settings = kernel && Array.isArray(kernel.settings) ? kernel.settings : [];
  return settings.map((s: any, i: number) => {
    const status = statusWords(text(s?.status, trans), trans);
    return {
      key: `${text(s?.setting, trans)}-${i}`,
      setting: text(s?.setting, trans),
      asked: text(s?.asked, trans),
      status: status.words,
      detail: text(s?.detail, trans),
      level: status.level
    };
  });
}

/** TensorFlow's logical devices, each with its allocator's memory where the memory section has it. */
export function deviceRows(
  kernel: Sections | null | undefined,
  memory: Sections | null | undefined,
  trans: Trans = plainTrans
): { rows: DeviceRow[]; note: string } {
  const tf = (kernel && kernel.tensorflow) || {};
  const logical: any[] | null = Array.isArray(tf.logical_devices) ? tf.logical_devices : null;
  const allocators: any[] = memory && Array.isArray(memory.devices) ? memory.devices : [];
  const byName = new Map<string, any>(allocators.map(m => [text(m?.device, trans), m]));
  const memoryText = (m: any): string => {
    if (!m || !isNumber(m.current_mib)) {
      return m ? trans.__('n/a') : '';
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
export function cellRows(cells: unknown, count = 5, trans: Trans = plainTrans): CellRow[] {
  if (!Array.isArray(cells)) {
    return [];
  }
  return cells.slice(-count).map((c: any, i: number) => {
    const label = isNumber(c?.cell) ? trans.__('[%1]', c.cell) : trans.__('[?]');
    const devices = (Array.isArray(c?.devices) ? c.devices : []).map((d: any) => {
      const delta = isNumber(d?.delta_mib) ? formatDeltaMiB(d.delta_mib, trans) : trans.__('n/a');
      const peak = isNumber(d?.peak_mib) ? formatMiB(d.peak_mib, trans) : trans.__('n/a');
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

/** Everything the "This notebook" section shows, from the merged sections (null: nothing received). */
export function notebookView(sections: Sections | null, trans: Trans = plainTrans): NotebookView {
  const s = sections ?? {};
  const kernel = s.kernel && typeof s.kernel === 'object' ? (s.kernel as Sections) : null;
  const view: NotebookView = {
    connected: kernel !== null,
    tensorflow: '',
    tensorflowNote: '',
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
  const state = stateWords(text(tf.state, trans), trans);
  view.tensorflow = tf.version
    ? trans.__('TensorFlow %1: %2', text(tf.version, trans), state)
    : trans.__('TensorFlow: %1', state);
  view.tensorflowNote = text(tf.note, trans);
  const parts = [];
  if (isNumber(kernel.pid)) {
    parts.push(trans.__('kernel pid %1', kernel.pid));
  }
  if (kernel.tfgpu_version) {
    parts.push(trans.__('tfgpu_magic %1', text(kernel.tfgpu_version, trans)));
  }
  view.kernel = parts.join(' · ');
  view.settings = settingRows(kernel, trans);
  view.settingsEmpty = view.settings.length ? '' : trans.__('No setting asked (%tfgpu help lists them).');
  const devices = deviceRows(kernel, s.memory, trans);
  view.devices = devices.rows;
  view.devicesNote = devices.note;
  view.cells = cellRows(s.cells, 5, trans);
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

/**
 * The line shown while the server does not answer (the last figures stay on screen under it).
 * `status` is the HTTP status of the failed request, or null when no answer came at all.
 */
export function serverProblem(status: number | null, trans: Trans = plainTrans): string {
  if (status === null || status === 0) {
    return trans.__('Server not answering; retrying…');
  }
  if (status === 404) {
    return trans.__(
      'Server not answering (404: is the tfgpu_magic server extension enabled?); retrying…'
    );
  }
  if (status === 403) {
    return trans.__('Server refused the request (403: logged out?); retrying…');
  }
  return trans.__('Server not answering (HTTP %1); retrying…', status);
}

// -- saved settings (the notebook's `tfgpu` metadata) ------------------------------------------------------

/** The settings a notebook can carry, in the order the kernel applies them (tfgpu_magic/saved.py ORDER). */
export const SETTING_NAMES = ['visible', 'cpus', 'cpumem', 'growth', 'limit', 'virtual', 'placement'] as const;
export type SettingName = (typeof SETTING_NAMES)[number];

/** The settings that may hold one value per GPU: a list of `%tfgpu` argument texts, each with its `--gpu I`. */
export const PER_GPU_SETTINGS: ReadonlySet<SettingName> = new Set<SettingName>(['limit', 'virtual']);

/** What the editor's empty inputs show: the values each setting takes. */
export const SETTING_PLACEHOLDERS: Readonly<Record<SettingName, string>> = {
  visible: '1 / auto / all',
  cpus: '4',
  cpumem: 'on|off',
  growth: 'on|off',
  limit: '40% / 2GB',
  virtual: '2x2GB',
  placement: 'on|off'
};

/** The metadata version this sidebar reads and writes. */
export const SAVED_VERSION = 1;

/** One setting's saved value: the text after `%tfgpu <name>`, or (limit, virtual) one such text per GPU. */
export type SettingValue = string | string[];
export type SavedSettings = { [name in SettingName]?: SettingValue };

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
 * - `invalid`: not the shape of the key: not applied; `message` says what is wrong.
 */
export type SavedRead =
  | { kind: 'none' }
  | { kind: 'ok'; saved: SavedDocument }
  | { kind: 'newer'; version: number; message: string }
  | { kind: 'invalid'; message: string };

function isPlainObject(value: unknown): value is { [key: string]: unknown } {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isSettingName(name: string): name is SettingName {
  return (SETTING_NAMES as readonly string[]).includes(name);
}

function shortJSON(value: unknown, length = 60): string {
  let out: string;
  try {
    out = JSON.stringify(value) ?? String(value);
  } catch {
    out = String(value);
  }
  return out.length > length ? `${out.slice(0, length - 1)}…` : out;
}

/**
 * The settings' shape: an object of known names, each a non-empty string, or for limit and virtual a
 * non-empty list of them. Returns the trimmed settings in apply order, or what is wrong (the kernel's
 * `normalise` checks the same).
 */
export function checkSettings(
  settings: unknown,
  trans: Trans = plainTrans
): { ok: true; settings: SavedSettings } | { ok: false; message: string } {
  if (!isPlainObject(settings)) {
    return { ok: false, message: trans.__('the saved settings are %1, not an object', shortJSON(settings)) };
  }
  const unknown = Object.keys(settings).filter(name => !isSettingName(name));
  if (unknown.length) {
    return {
      ok: false,
      message: trans.__('unknown saved setting %1; valid: %2', shortJSON(unknown[0], 40), SETTING_NAMES.join(', '))
    };
  }
  const out: SavedSettings = {};
  for (const name of SETTING_NAMES) {
    const value = settings[name];
    if (value === undefined || value === null) {
      continue;
    }
    const values = Array.isArray(value) ? value : [value];
    const good =
      values.length > 0 &&
      values.every(v => typeof v === 'string' && v.trim() !== '') &&
      (values.length === 1 || PER_GPU_SETTINGS.has(name));
    if (!good) {
      return {
        ok: false,
        message: PER_GPU_SETTINGS.has(name)
          ? trans.__('saved %1 is %2: expected the text after `%tfgpu %1`, or a list of them, one per GPU', name, shortJSON(value))
          : trans.__('saved %1 is %2: expected the text after `%tfgpu %1`', name, shortJSON(value))
      };
    }
    const trimmed = (values as string[]).map(v => v.trim());
    out[name] = Array.isArray(value) ? trimmed : trimmed[0];
  }
  return { ok: true, settings: out };
}

/** Read `metadata.tfgpu` (undefined when the notebook has none) for its shape. */
export function readSaved(raw: unknown, trans: Trans = plainTrans): SavedRead {
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
  const checked = checkSettings(raw.settings === undefined ? {} : raw.settings, trans);
  if (!checked.ok) {
    return { kind: 'invalid', message: checked.message };
  }
  return { kind: 'ok', saved: { version: SAVED_VERSION, apply_on_start: apply, settings: checked.settings } };
}

/** The metadata document to write for these settings. */
export function savedDocument(settings: SavedSettings, applyOnStart: boolean): SavedDocument {
  const checked = checkSettings(settings);
  return { version: SAVED_VERSION, apply_on_start: applyOnStart, settings: checked.ok ? checked.settings : {} };
}

/** Whether any setting is saved. */
export function hasSettings(settings: SavedSettings | null | undefined): boolean {
  return !!settings && SETTING_NAMES.some(name => settings[name] !== undefined);
}

/** Each saved value as one `%tfgpu` argument line, in apply order: ["cpus 3", "limit 2GB --gpu 0", ...]. */
export function settingLines(settings: SavedSettings): string[] {
  const lines: string[] = [];
  for (const name of SETTING_NAMES) {
    const value = settings[name];
    for (const v of value === undefined ? [] : Array.isArray(value) ? value : [value]) {
      lines.push(`${name} ${v}`);
    }
  }
  return lines;
}

/**
 * The source of a first cell that sets the same up where nothing applies saved settings (nbconvert,
 * papermill): `%load_ext tfgpu_magic`, then one `%tfgpu <name> <value>` per saved value in apply order.
 * Takes the metadata document, or just its settings.
 */
export function firstCellSource(saved: SavedDocument | SavedSettings | unknown): string {
  const object = isPlainObject(saved) ? saved : {};
  const settings = isPlainObject(object.settings) ? object.settings : 'settings' in object ? {} : object;
  const checked = checkSettings(settings);
  const lines = checked.ok ? settingLines(checked.settings) : [];
  return ['%load_ext tfgpu_magic', ...lines.map(line => `%tfgpu ${line}`)].join('\n');
}

/** Whether a cell's source is only `%load_ext tfgpu_magic` and `%tfgpu` lines (a first cell written before). */
export function isFirstCellSource(source: string): boolean {
  const lines = source
    .split('\n')
    .map(line => line.trim())
    .filter(Boolean);
  return lines[0] === '%load_ext tfgpu_magic' && lines.slice(1).every(line => /^%tfgpu\s+\S/.test(line));
}

/** One setting's value as the editor's text: a per-GPU list joins with "; ". */
export function editorText(value: SettingValue | undefined): string {
  return value === undefined ? '' : Array.isArray(value) ? value.join('; ') : value;
}

/** The editor's texts as settings: empty means not set; "a; b" is a per-GPU list (limit, virtual). */
export function settingsFromEditor(texts: { [name: string]: string | undefined }): SavedSettings {
  const out: SavedSettings = {};
  for (const name of SETTING_NAMES) {
    const text = (texts[name] ?? '').trim();
    if (!text) {
      continue;
    }
    const parts = PER_GPU_SETTINGS.has(name)
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

/** The saved settings as rows to show: name and value text. */
export function savedRows(settings: SavedSettings): { name: SettingName; value: string }[] {
  return SETTING_NAMES.filter(name => settings[name] !== undefined).map(name => ({
    name,
    value: editorText(settings[name])
  }));
}

// -- applying them at kernel start --------------------------------------------------------------------------

/** What the silent apply asks back: the kernel's result of the apply, as JSON. */
export const APPLY_USER_EXPRESSION = "__import__('tfgpu_magic.saved').saved.last_result()";

/**
 * The code the sidebar runs silently at kernel start. The document goes in as a JSON string literal,
 * which is a valid Python string literal too.
 */
export function applyCode(saved: SavedDocument | unknown): string {
  return `__import__('tfgpu_magic.saved').saved.apply_json(${JSON.stringify(JSON.stringify(saved))})`;
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
 * - `result`: the kernel ran it; `ok` false means it applied nothing and `message` says why;
 * - `not-installed`: tfgpu_magic is not importable in the kernel;
 * - `interrupted`: aborted, interrupted, or the kernel went away before it answered;
 * - `error`: anything else (a bug, a kernel that is not Python): `message` has the kernel's words.
 */
export type ApplyReply =
  | { kind: 'result'; ok: boolean; message: string | null; outcomes: ApplyOutcome[]; placement: 'on' | 'off' | null }
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
  return {
    kind: 'result',
    ok: result.ok,
    message: typeof result.message === 'string' && result.message ? result.message : null,
    outcomes,
    placement
  };
}

/**
 * Where the saved settings of one notebook stand, as the sidebar shows it:
 * - `applying`: sent at kernel start, no answer yet;
 * - `done`: the kernel answered (`afterRestart`: the start was our "Restart kernel and apply");
 * - `skipped`: apply_on_start is on but the metadata cannot be applied (`message` says why).
 */
export type ApplyState =
  | { kind: 'applying'; afterRestart: boolean; settings?: SavedSettings }
  | { kind: 'done'; reply: ApplyReply; afterRestart: boolean; kernelName: string; settings?: SavedSettings }
  | { kind: 'skipped'; message: string };

/**
 * Whether the notebook's saved settings differ from those its kernel was given at its start (they were
 * edited since): the sidebar then says they apply at the next start.
 */
export function savedChangedSince(state: ApplyState | null, saved: SavedSettings | null): boolean {
  if (!state || state.kind === 'skipped' || !state.settings) {
    return false;
  }
  const order = (settings: SavedSettings | null) => JSON.stringify(SETTING_NAMES.map(name => settings?.[name] ?? null));
  return order(state.settings) !== order(saved);
}

/** "cpus 3 → applied (3 logical CPUs); placement on". */
export function outcomesText(
  outcomes: ApplyOutcome[],
  placement: 'on' | 'off' | null,
  trans: Trans = plainTrans
): string {
  const parts = outcomes.map(o => {
    const words = statusWords(o.status, trans).words;
    const head = trans.__('%1 %2 → %3', o.setting, o.asked, words).replace(/\s+/g, ' ');
    // "waiting for import" says it all: its detail ("applied when TensorFlow is imported") only repeats it.
    return o.detail && o.status !== 'pending' ? trans.__('%1 (%2)', head, o.detail) : head;
  });
  if (placement !== null) {
    parts.push(placement === 'on' ? trans.__('placement on') : trans.__('placement off'));
  }
  return parts.join('; ');
}

/** The apply-status line of the "Saved settings" section (null state: nothing was applied here). */
export function applyStatusView(
  state: ApplyState | null,
  trans: Trans = plainTrans
): { text: string; level: Level; retry: boolean } | null {
  if (state === null) {
    return null;
  }
  if (state.kind === 'skipped') {
    return { text: trans.__('Saved settings not applied at kernel start: %1', state.message), level: 'error', retry: false };
  }
  if (state.kind === 'applying') {
    return {
      text: state.afterRestart
        ? trans.__('Kernel restarting; applying the saved settings…')
        : trans.__('Applying the saved settings…'),
      level: 'info',
      retry: false
    };
  }
  const reply = state.reply;
  switch (reply.kind) {
    case 'result': {
      if (!reply.ok) {
        return {
          text: trans.__('Saved settings refused at kernel start, none applied: %1', reply.message ?? trans.__('no reason given')),
          level: 'error',
          retry: false
        };
      }
      const what = outcomesText(reply.outcomes, reply.placement, trans) || trans.__('nothing to apply');
      return {
        text: state.afterRestart
          ? trans.__('Kernel restarted; saved settings applied: %1', what)
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
  message: string;
}

/**
 * Settings the user asked for that the kernel refused as too late (its `kernel` section's `refused`), and
 * what a restart should apply instead (its `wanted`, in the metadata's settings form; null when absent or
 * not of that shape).
 */
export function refusedView(
  kernel: Sections | null | undefined,
  trans: Trans = plainTrans
): { rows: RefusedRow[]; wanted: SavedSettings | null } {
  const refused: unknown[] = kernel && Array.isArray(kernel.refused) ? kernel.refused : [];
  const rows = refused.filter(isPlainObject).map((r, i) => {
    const setting = text(r.setting, trans);
    const asked = text(r.asked, trans);
    return {
      key: `refused-${setting}-${i}`,
      setting,
      asked,
      message: text(r.message, trans) || trans.__('%1 %2 was refused: the runtime has started', setting, asked)
    };
  });
  const checked = kernel && kernel.wanted !== undefined ? checkSettings(kernel.wanted, trans) : null;
  return { rows, wanted: checked && checked.ok ? checked.settings : null };
}

/** The kernel's answer to `{"request": "validate"}`: `errors` maps a setting ("" for the whole) to its message. */
export interface Validated {
  id: number;
  ok: boolean;
  errors: { [setting: string]: string };
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
  return { id: data.id, ok: data.ok === true && Object.keys(errors).length === 0, errors };
}

/** A comm message `{"type": "request", "action": "restart-and-apply", "settings": {...}}`, or null. */
export function parseKernelRequest(data: unknown): { action: 'restart-and-apply'; settings: SavedSettings } | null {
  if (!isPlainObject(data) || data.type !== 'request' || data.action !== 'restart-and-apply') {
    return null;
  }
  const checked = checkSettings(data.settings ?? {});
  return checked.ok ? { action: 'restart-and-apply', settings: checked.settings } : null;
}
