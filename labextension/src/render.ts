/**
 * DOM for the sidebar, built from what model/ returns. Text goes in with `textContent` only: a
 * notebook named `<img src=x onerror=...>.ipynb` shows as that text and nothing else.
 */
import type { TranslationBundle } from '@jupyterlab/translation';

import type {
  GpuRow,
  Level,
  NotebookGroup,
  NotebookView,
  OtherProcessRow,
  RefusedRow,
  SavedSettings,
  ServerView,
  Shown
} from './model';

/** An element with classes and (optional) text. */
export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  className = '',
  text?: string,
  title?: string
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (className) {
    node.className = className;
  }
  if (text !== undefined) {
    node.textContent = text;
  }
  if (title) {
    node.title = title;
  }
  return node;
}

/** A value that may be "n/a": its reason goes in the tooltip. */
function shown(value: Shown, className = ''): HTMLSpanElement {
  const node = el('span', `${className} ${value.na ? 'tfgpu-na' : ''}`.trim(), value.text, value.title);
  return node;
}

export function line(text: string, level: Level | 'muted' = 'muted', className = ''): HTMLDivElement {
  return el('div', `tfgpu-line tfgpu-${level} ${className}`.trim(), text);
}

export interface ServerActions {
  openNotebook(path: string): void;
}

function notebookRow(group: NotebookGroup, actions: ServerActions, trans: TranslationBundle): HTMLLIElement {
  const row = el('li', 'tfgpu-item tfgpu-notebook', undefined, `${group.label}\n${group.title}`);
  row.dataset.kernelId = group.kernelId;
  if (group.isFront) {
    row.classList.add('tfgpu-front');
  }
  if (group.executionState === 'busy') {
    row.classList.add('tfgpu-busy');
  }
  if (group.mark) {
    // A dot, named for screen readers and in its tooltip: the label keeps the narrow sidebar's width.
    const mark = el('span', 'tfgpu-mark', '\u25CF', group.mark);
    mark.setAttribute('role', 'img');
    mark.setAttribute('aria-label', group.mark);
    row.appendChild(mark);
  }
  row.appendChild(el('span', 'tfgpu-item-label', group.label));
  row.appendChild(shown(group.memory, 'tfgpu-item-figure'));
  const path = group.openPath;
  if (path !== null) {
    row.classList.add('tfgpu-clickable');
    row.tabIndex = 0;
    row.setAttribute('role', 'button');
    row.setAttribute('aria-label', trans.__('Open %1', path));
    row.addEventListener('click', () => actions.openNotebook(path));
    row.addEventListener('keydown', (event: KeyboardEvent) => {
      if (event.key === 'Enter' || event.key === ' ') {
        event.preventDefault();
        actions.openNotebook(path);
      }
    });
  }
  return row;
}

function otherRow(proc: OtherProcessRow, trans: TranslationBundle): HTMLLIElement {
  const summary = `${proc.name.text} · ${trans.__('pid %1', proc.pid.text)} · ${proc.user.text} · ${proc.memory.text}`;
  const row = el('li', 'tfgpu-item tfgpu-process', undefined, [summary, proc.title].filter(Boolean).join('\n'));
  const label = el('span', 'tfgpu-item-label');
  label.appendChild(shown(proc.name));
  label.appendChild(el('span', 'tfgpu-muted', ` ${trans.__('pid %1', proc.pid.text)} · `));
  label.appendChild(shown(proc.user, 'tfgpu-muted'));
  row.appendChild(label);
  row.appendChild(shown(proc.memory, 'tfgpu-item-figure'));
  return row;
}

function gpuBlock(gpu: GpuRow, actions: ServerActions, trans: TranslationBundle): HTMLDivElement {
  const block = el('div', 'tfgpu-gpu');
  block.dataset.gpu = gpu.key;
  block.appendChild(el('div', 'tfgpu-gpu-heading', gpu.heading.text, gpu.heading.title || gpu.heading.text));
  if (gpu.error !== null) {
    block.classList.add('tfgpu-gpu-failed');
    block.appendChild(line(gpu.error, 'error'));
  } else {
    const bar = el('div', 'tfgpu-bar', undefined, gpu.memory.title || gpu.memory.text);
    bar.setAttribute('role', 'meter');
    bar.setAttribute('aria-label', trans.__('Memory used'));
    bar.setAttribute('aria-valuemin', '0');
    bar.setAttribute('aria-valuemax', '100');
    if (gpu.memory.percent !== null) {
      bar.setAttribute('aria-valuenow', String(gpu.memory.percent));
    }
    bar.setAttribute('aria-valuetext', gpu.memory.text);
    const fill = el('div', 'tfgpu-bar-fill');
    fill.style.width = `${((gpu.memory.fraction ?? 0) * 100).toFixed(1)}%`;
    if ((gpu.memory.fraction ?? 0) >= 0.9) {
      fill.classList.add('tfgpu-bar-high');
    }
    bar.appendChild(fill);
    block.appendChild(bar);
    const figures = el('div', 'tfgpu-figures');
    figures.appendChild(shown({ text: gpu.memory.text, title: gpu.memory.title, na: gpu.memory.na }, 'tfgpu-memory'));
    const right = el('span', 'tfgpu-figures-right');
    right.appendChild(el('span', 'tfgpu-muted', trans.__('util') + ' '));
    right.appendChild(shown(gpu.utilization, 'tfgpu-util'));
    right.appendChild(el('span', 'tfgpu-muted', ' · '));
    right.appendChild(shown(gpu.temperature, 'tfgpu-temp'));
    figures.appendChild(right);
    block.appendChild(figures);
  }
  if (gpu.notebooks.length || gpu.others.length) {
    const list = el('ul', 'tfgpu-list');
    for (const group of gpu.notebooks) {
      list.appendChild(notebookRow(group, actions, trans));
    }
    for (const proc of gpu.others) {
      list.appendChild(otherRow(proc, trans));
    }
    block.appendChild(list);
  } else if (gpu.error === null && gpu.processesMissing === null && !gpu.hidden) {
    block.appendChild(line(trans.__('No process.'), 'muted'));
  }
  if (gpu.processesMissing !== null && gpu.error === null) {
    block.appendChild(line(trans.__('Processes: n/a (%1)', gpu.processesMissing), 'muted'));
  }
  if (gpu.hidden) {
    block.appendChild(line(gpu.hidden, 'muted', 'tfgpu-hidden'));
  }
  if (gpu.kernelNote) {
    block.appendChild(line(gpu.kernelNote, 'muted', 'tfgpu-note'));
  }
  return block;
}

/** The body of "All GPUs". */
export function renderServer(
  view: ServerView | null,
  actions: ServerActions,
  trans: TranslationBundle
): DocumentFragment {
  const out = document.createDocumentFragment();
  if (view === null) {
    out.appendChild(line(trans.__('Asking the server…'), 'muted'));
    return out;
  }
  if (view.problem !== null) {
    out.appendChild(line(view.problem, 'warn', 'tfgpu-problem'));
  }
  if (view.stale !== null && view.problem === null) {
    out.appendChild(line(view.stale, 'warn', 'tfgpu-stale'));
  }
  if (view.driver) {
    out.appendChild(line(view.driver, 'muted', 'tfgpu-driver'));
  }
  if (view.empty !== null) {
    out.appendChild(line(view.empty, 'muted'));
  }
  for (const gpu of view.gpus) {
    out.appendChild(gpuBlock(gpu, actions, trans));
  }
  if (view.kernelNote) {
    out.appendChild(line(view.kernelNote, 'muted', 'tfgpu-note'));
  }
  return out;
}

function subheading(text: string): HTMLDivElement {
  return el('div', 'tfgpu-subheading', text);
}

/**
 * The settings as a table: setting, asked and status on one row, the detail under them across the row (a
 * sidebar is too narrow for four columns).
 */
function settingsTable(view: NotebookView, trans: TranslationBundle): HTMLTableElement {
  const node = el('table', 'tfgpu-table tfgpu-settings');
  const head = el('thead');
  const tr = el('tr');
  for (const h of [trans.__('setting'), trans.__('asked'), trans.__('status')]) {
    tr.appendChild(el('th', '', h));
  }
  head.appendChild(tr);
  node.appendChild(head);
  const body = el('tbody');
  for (const s of view.settings) {
    const row = el('tr', 'tfgpu-setting');
    row.appendChild(el('td', 'tfgpu-setting-name', s.setting));
    row.appendChild(el('td', 'tfgpu-setting-asked', s.asked));
    row.appendChild(el('td', `tfgpu-setting-status tfgpu-${s.level}`, s.status));
    body.appendChild(row);
    if (s.detail) {
      const detail = el('tr', 'tfgpu-setting-detail');
      const cell = el('td', 'tfgpu-muted', s.detail);
      cell.colSpan = 3;
      detail.appendChild(cell);
      body.appendChild(detail);
    }
  }
  node.appendChild(body);
  return node;
}

/** The body of "This notebook" once the kernel answered. */
export function renderNotebook(view: NotebookView, trans: TranslationBundle): DocumentFragment {
  const out = document.createDocumentFragment();
  if (view.error) {
    out.appendChild(line(view.error, 'error', 'tfgpu-kernel-error'));
  }
  if (!view.connected) {
    return out;
  }
  out.appendChild(el('div', 'tfgpu-tf', view.tensorflow));
  if (view.tensorflowNote) {
    out.appendChild(line(view.tensorflowNote, 'muted'));
  }
  if (view.kernel) {
    out.appendChild(line(view.kernel, 'muted'));
  }

  out.appendChild(subheading(trans.__('Settings')));
  if (view.settings.length) {
    out.appendChild(settingsTable(view, trans));
  } else {
    out.appendChild(line(view.settingsEmpty, 'muted'));
  }

  out.appendChild(subheading(trans.__('Logical devices')));
  if (view.devices.length) {
    const list = el('ul', 'tfgpu-list tfgpu-devices');
    for (const d of view.devices) {
      const row = el('li', 'tfgpu-item', undefined, d.note);
      const label = el('span', 'tfgpu-item-label', d.name);
      if (d.physical) {
        label.appendChild(el('span', 'tfgpu-muted', ` (${d.physical})`));
      }
      row.appendChild(label);
      row.appendChild(el('span', 'tfgpu-item-figure', d.memory));
      list.appendChild(row);
    }
    out.appendChild(list);
  }
  if (view.devicesNote) {
    out.appendChild(line(view.devicesNote, 'muted'));
  }

  out.appendChild(subheading(trans.__('Recent cells')));
  if (view.cells.length) {
    const list = el('ul', 'tfgpu-list tfgpu-cells');
    for (const c of view.cells) {
      const row = el('li', `tfgpu-item ${c.success ? '' : 'tfgpu-failed'}`.trim(), undefined, c.title);
      const label = el('span', 'tfgpu-item-label');
      label.appendChild(el('span', 'tfgpu-cell-number', c.label));
      label.appendChild(el('span', 'tfgpu-muted', ` ${c.duration}`));
      row.appendChild(label);
      row.appendChild(el('span', 'tfgpu-item-figure', c.devices.join('; ')));
      list.appendChild(row);
    }
    out.appendChild(list);
  } else if (view.cellsNote) {
    out.appendChild(line(view.cellsNote, 'muted'));
  }

  if (view.placement) {
    out.appendChild(subheading(trans.__('Placement')));
    out.appendChild(line(view.placement.summary, 'muted'));
    if (view.placement.rows.length) {
      const list = el('ul', 'tfgpu-list tfgpu-placement');
      for (const r of view.placement.rows) {
        const row = el('li', 'tfgpu-item', undefined, r.title);
        const label = el('span', 'tfgpu-item-label');
        label.appendChild(el('span', 'tfgpu-cell-number', r.cell));
        label.appendChild(document.createTextNode(` ${r.opType}`));
        row.appendChild(label);
        row.appendChild(el('span', 'tfgpu-item-figure', `\u2192 ${r.device}`));
        list.appendChild(row);
      }
      out.appendChild(list);
    }
    for (const note of view.placement.notes) {
      out.appendChild(line(note, 'muted', 'tfgpu-note'));
    }
  }
  for (const note of view.notes) {
    out.appendChild(line(note, 'warn', 'tfgpu-note'));
  }
  return out;
}

/**
 * The warning box shown while the kernel refused settings as too late (TensorFlow's runtime had started):
 * each refusal in the kernel's words, and a button that restarts the kernel and applies what was wanted.
 */
export function renderRefused(
  refused: { rows: RefusedRow[]; wanted: SavedSettings | null },
  restartAndApply: (settings: SavedSettings) => void,
  trans: TranslationBundle
): HTMLDivElement {
  const box = el('div', 'tfgpu-refused');
  box.setAttribute('role', 'alert');
  box.appendChild(
    el(
      'div',
      'tfgpu-refused-title',
      trans._n(
        'A setting was refused: TensorFlow had already started',
        '%1 settings were refused: TensorFlow had already started',
        refused.rows.length
      )
    )
  );
  for (const row of refused.rows) {
    const message = el('div', 'tfgpu-refused-message', row.message);
    message.dataset.setting = row.setting;
    box.appendChild(message);
  }
  const wanted = refused.wanted;
  if (wanted) {
    const restart = el(
      'button',
      'jp-Button jp-mod-styled jp-mod-warn tfgpu-refused-restart',
      trans.__('Restart kernel and apply'),
      trans.__("Save these settings in the notebook, restart the kernel and apply them before any cell (the kernel's variables are lost)")
    );
    restart.type = 'button';
    restart.addEventListener('click', () => restartAndApply(wanted));
    box.appendChild(restart);
  } else {
    box.appendChild(
      line(trans.__('Restart the kernel and run the settings before TensorFlow starts.'), 'muted', 'tfgpu-note')
    );
  }
  return box;
}
