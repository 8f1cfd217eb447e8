/**
 * DOM for the sidebar, built from what model/ returns: the shared helpers and "This notebook" ("All GPUs" is
 * in allgpus.ts). Text goes in with `textContent` only: a notebook named `<img src=x onerror=...>.ipynb`
 * shows as that text and nothing else.
 */
import type { TranslationBundle } from '@jupyterlab/translation';
import { closeIcon } from '@jupyterlab/ui-components';

import type { Level, NotebookView, RefusedRow, SavedSettings, Shown } from './model';

/** The browser's localStorage, or null where the page may not use it (a sandboxed frame, some private modes). */
export function browserStorage(): Storage | null {
  try {
    return window.localStorage;
  } catch {
    return null;
  }
}

/** The × that hides a sidebar line in this browser ("Hide this line"); `className` adds to its classes. */
export function dismissButton(trans: TranslationBundle, onClick: () => void, className = ''): HTMLButtonElement {
  const label = trans.__('Hide this line');
  const button = el('button', `jp-Button jp-mod-minimal tfgpu-released-dismiss ${className}`.trim(), undefined, label);
  button.type = 'button';
  button.setAttribute('aria-label', label);
  button.appendChild(closeIcon.element({ tag: 'span', className: 'tfgpu-shutdown-icon' }));
  button.addEventListener('click', onClick);
  return button;
}

/**
 * What names a control across re-renders (a new node for the same button): its tag, classes, and the kernel and GPU of
 * its row, or else its label.
 */
function focusKey(node: HTMLElement): string {
  const kernel = node.closest<HTMLElement>('[data-kernel-id]')?.dataset.kernelId ?? '';
  const device = node.closest<HTMLElement>('[data-mig], [data-gpu]');
  const label = kernel ? '' : (node.getAttribute('aria-label') ?? node.textContent ?? '');
  return [node.tagName, node.className, kernel, device?.dataset.mig ?? device?.dataset.gpu ?? '', label].join('|');
}

/**
 * Run `render`, which replaces nodes of `root`, and give the keyboard focus back to the control it was on (the same
 * node if it was moved, else the new one of the same name): a re-render every few seconds must not drop a keyboard
 * user's place to the page's start.
 */
export function keepFocus(root: HTMLElement, render: () => void): void {
  const active = document.activeElement;
  const before = active instanceof HTMLElement && root.contains(active) ? active : null;
  const key = before ? focusKey(before) : '';
  render();
  if (!before || root.contains(document.activeElement)) {
    return;
  }
  const again = root.contains(before)
    ? before
    : Array.from(root.querySelectorAll<HTMLElement>(before.tagName)).find(node => focusKey(node) === key);
  again?.focus({ preventScroll: true });
}

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

/**
 * Give every element of `root` whose text is clipped (wider than its box: an ellipsis) a tooltip that holds its
 * full text, before the tooltip it had. Needs layout: call it when `root` is shown, after a render or a resize.
 */
export function titleClipped(root: HTMLElement): void {
  for (const node of Array.from(root.querySelectorAll<HTMLElement>('*'))) {
    const field = node instanceof HTMLInputElement || node instanceof HTMLTextAreaElement;
    if (field || node.scrollWidth <= node.clientWidth) {
      continue;
    }
    const full = (node.textContent ?? '').replace(/\s+/g, ' ').trim();
    if (full && !node.title.replace(/\s+/g, ' ').includes(full)) {
      node.title = node.title ? `${full}\n${node.title}` : full;
    }
  }
}

/** A value that may be "n/a": its reason goes in the tooltip. */
export function shown(value: Shown, className = ''): HTMLSpanElement {
  const node = el('span', `${className} ${value.na ? 'tfgpu-na' : ''}`.trim(), value.text, value.title);
  return node;
}

export function line(text: string, level: Level | 'muted' = 'muted', className = ''): HTMLDivElement {
  return el('div', `tfgpu-line tfgpu-${level} ${className}`.trim(), text);
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
  if (view.noGpu) {
    out.appendChild(line(view.noGpu, 'warn', 'tfgpu-no-gpu'));
  }
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
    // The magic's line and why in one line; the long rest (the tf.config call it would need) folded.
    const message = el('div', 'tfgpu-refused-message');
    message.dataset.setting = row.setting;
    message.appendChild(el('code', 'tfgpu-refused-command', row.command, row.command));
    message.appendChild(el('div', 'tfgpu-refused-reason', row.reason));
    if (row.details) {
      const details = el('details', 'tfgpu-refused-details');
      details.appendChild(el('summary', '', trans.__('Details')));
      details.appendChild(el('div', 'tfgpu-refused-details-text', row.details));
      message.appendChild(details);
    }
    box.appendChild(message);
  }
  const wanted = refused.wanted;
  if (wanted) {
    const restart = el(
      'button',
      'jp-Button jp-mod-styled tfgpu-danger tfgpu-refused-restart',
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
