/**
 * DOM of the "All GPUs" section: one block per GPU (memory bar, figures, chart), its MIG devices as rows
 * under it, and each device's processes grouped by notebook, with "Shut down" on this server's kernels.
 * Text goes in with `textContent` only (render.ts's helpers).
 */
import type { TranslationBundle } from '@jupyterlab/translation';
import { closeIcon } from '@jupyterlab/ui-components';

import type {
  GpuRow,
  MemoryBar,
  MigRow,
  NotebookGroup,
  OtherProcessRow,
  ProcessTag,
  ServerView,
  ShutdownTarget,
  Shown
} from './model';
import { el, line, shown } from './render';

export interface ServerActions {
  openNotebook(path: string): void;
  /**
   * The chart of the series `key` (a GPU's or a MIG device's key in the history), kept by the sidebar across
   * renders; null where there is none (no history from the server, or it does not sample).
   */
  chart(key: string | null, utilization: boolean, small: boolean, device: string): HTMLElement | null;
  /** Offer to shut the kernel down (its dialog); absent: no "Shut down" buttons. */
  shutdown?(target: ShutdownTarget): void;
  /** Whether a shut-down of this kernel is under way (its button is then disabled). */
  shuttingDown?(kernelId: string): boolean;
}

function shutdownButton(target: ShutdownTarget, actions: ServerActions, trans: TranslationBundle): HTMLButtonElement {
  const label = trans.__('Shut down the kernel of %1', target.name);
  const button = el('button', 'jp-Button jp-mod-minimal tfgpu-shutdown', undefined, label);
  button.type = 'button';
  button.setAttribute('aria-label', label);
  button.dataset.kernelId = target.kernelId;
  button.appendChild(closeIcon.element({ tag: 'span', className: 'tfgpu-shutdown-icon' }));
  button.disabled = actions.shuttingDown?.(target.kernelId) ?? false;
  button.addEventListener('click', (event: MouseEvent) => {
    event.stopPropagation();
    actions.shutdown?.(target);
  });
  return button;
}

/** nvidia-smi's type of a graphics process ("G", "C+G") as a small tag, its meaning in the tooltip; null for compute. */
function typeTag(tag: ProcessTag): HTMLSpanElement | null {
  if (!tag.text) {
    return null;
  }
  const node = el('span', 'tfgpu-tag tfgpu-type-tag', tag.text, tag.title);
  node.dataset.type = tag.text;
  return node;
}

function notebookRow(group: NotebookGroup, actions: ServerActions, trans: TranslationBundle): HTMLLIElement {
  const row = el('li', 'tfgpu-item tfgpu-notebook', undefined, `${group.label}\n${group.title}`);
  row.dataset.kernelId = group.kernelId;
  if (group.isFront) {
    row.classList.add('tfgpu-front');
  }
  if (group.executionState === 'busy' || group.activityState === 'running') {
    row.classList.add('tfgpu-busy');
  }
  if (group.activityState === 'gpu_busy') {
    row.classList.add('tfgpu-gpu-busy'); // no cell running, yet working on the GPU: not idle
  }
  if (group.mark) {
    // A dot, named for screen readers and in its tooltip: the label keeps the narrow sidebar's width.
    const mark = el('span', 'tfgpu-mark', '\u25CF', group.mark);
    mark.setAttribute('role', 'img');
    mark.setAttribute('aria-label', group.mark);
    row.appendChild(mark);
  }
  // The part that opens the notebook (a button where it can be opened: Enter and Space for free); the shut-down
  // button beside it is a button of its own, not inside it.
  const path = group.openPath;
  const open = path !== null ? el('button', 'tfgpu-open') : el('span', 'tfgpu-open');
  open.appendChild(el('span', 'tfgpu-item-label', group.label));
  const tag = typeTag(group.tag);
  if (tag) {
    open.classList.add('tfgpu-typed');
    open.appendChild(tag);
  }
  if (group.activity) {
    const activity = el('span', 'tfgpu-activity', group.activity, group.activityTitle);
    if (group.activityState) {
      activity.dataset.state = group.activityState;
    }
    open.appendChild(activity);
  }
  open.appendChild(shown(group.memory, 'tfgpu-item-figure'));
  row.appendChild(open);
  if (open instanceof HTMLButtonElement && path !== null) {
    open.type = 'button';
    open.classList.add('tfgpu-clickable');
    // Its name says what it does and keeps its figures: "Open train.ipynb, 4,096 MiB".
    open.setAttribute('aria-label', trans.__('Open %1, %2', path, group.memory.text));
    open.addEventListener('click', () => actions.openNotebook(path));
  }
  if (group.shutdown && actions.shutdown) {
    row.appendChild(shutdownButton(group.shutdown, actions, trans));
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
  const tag = typeTag(proc.tag);
  if (tag) {
    row.appendChild(tag);
  }
  if (proc.otherServer) {
    row.classList.add('tfgpu-other-server');
    row.appendChild(
      el(
        'span',
        'tfgpu-tag',
        proc.otherServer,
        trans.__(
          "Runs as this server's OS user but is none of this server's kernels: under JupyterHub every user's server may run as one OS user, so it may be another user's."
        )
      )
    );
  }
  row.appendChild(shown(proc.memory, 'tfgpu-item-figure'));
  return row;
}

/** The memory bar, named for screen readers with its device ("GPU 1 memory used"), its figure as its value text. */
function memoryMeter(memory: MemoryBar, device: string, trans: TranslationBundle): HTMLDivElement {
  const bar = el('div', 'tfgpu-bar', undefined, memory.title || memory.text);
  bar.setAttribute('role', 'meter');
  bar.setAttribute('aria-label', trans.__('%1 memory used', device));
  bar.setAttribute('aria-valuemin', '0');
  bar.setAttribute('aria-valuemax', '100');
  if (memory.percent !== null) {
    bar.setAttribute('aria-valuenow', String(memory.percent));
  }
  bar.setAttribute('aria-valuetext', memory.text);
  const fill = el('div', 'tfgpu-bar-fill');
  fill.style.width = `${((memory.fraction ?? 0) * 100).toFixed(1)}%`;
  if ((memory.fraction ?? 0) >= 0.9) {
    fill.classList.add('tfgpu-bar-high');
  }
  bar.appendChild(fill);
  return bar;
}

function figures(memory: MemoryBar, right: [string, Shown, string][]): HTMLDivElement {
  const node = el('div', 'tfgpu-figures');
  node.appendChild(shown({ text: memory.text, title: memory.title, na: memory.na }, 'tfgpu-memory'));
  const side = el('span', 'tfgpu-figures-right');
  right.forEach(([label, value, className], i) => {
    if (i) {
      side.appendChild(el('span', 'tfgpu-muted', ' · '));
    }
    if (label) {
      side.appendChild(el('span', 'tfgpu-muted', label + ' '));
    }
    side.appendChild(shown(value, className));
  });
  node.appendChild(side);
  return node;
}

/** The process rows of a GPU or MIG device, and the lines on what is missing from them. */
function processList(
  device: Pick<
    GpuRow,
    'notebooks' | 'others' | 'processesMissing' | 'missing' | 'hidden' | 'kernelNote' | 'unattributed'
  >,
  sayNoProcess: boolean,
  actions: ServerActions,
  trans: TranslationBundle
): HTMLElement[] {
  const nodes: HTMLElement[] = [];
  if (device.notebooks.length || device.others.length) {
    const list = el('ul', 'tfgpu-list');
    for (const group of device.notebooks) {
      list.appendChild(notebookRow(group, actions, trans));
    }
    for (const proc of device.others) {
      list.appendChild(otherRow(proc, trans));
    }
    nodes.push(list);
  } else if (sayNoProcess && device.processesMissing === null && !device.hidden && !device.unattributed) {
    nodes.push(line(trans.__('No process.'), 'muted'));
  }
  if (device.unattributed) {
    // Where the rows are: memory held there that no row (and nobody) can be charged for, never left out as zero.
    nodes.push(line(device.unattributed, 'muted', 'tfgpu-unattributed'));
  }
  if (device.processesMissing !== null) {
    nodes.push(line(trans.__('Processes: %1 (%2)', device.missing, device.processesMissing), 'muted'));
  }
  if (device.hidden) {
    nodes.push(line(device.hidden, 'muted', 'tfgpu-hidden'));
  }
  if (device.kernelNote) {
    nodes.push(line(device.kernelNote, 'muted', 'tfgpu-note'));
  }
  return nodes;
}

function migBlock(mig: MigRow, actions: ServerActions, trans: TranslationBundle): HTMLDivElement {
  const block = el('div', 'tfgpu-mig');
  block.dataset.mig = mig.historyKey ?? mig.key;
  block.appendChild(el('div', 'tfgpu-mig-heading', mig.heading.text, mig.heading.title || mig.heading.text));
  block.appendChild(memoryMeter(mig.memory, mig.heading.text, trans));
  block.appendChild(figures(mig.memory, [[trans.__('util'), mig.utilization, 'tfgpu-util']]));
  const chart = actions.chart(mig.historyKey, false, true, mig.heading.text);
  if (chart) {
    block.appendChild(chart);
  }
  block.append(...processList(mig, true, actions, trans));
  return block;
}

function gpuBlock(gpu: GpuRow, actions: ServerActions, trans: TranslationBundle): HTMLDivElement {
  const block = el('div', 'tfgpu-gpu');
  block.dataset.gpu = gpu.key;
  block.appendChild(el('div', 'tfgpu-gpu-heading', gpu.heading.text, gpu.heading.title || gpu.heading.text));
  if (gpu.error !== null) {
    block.classList.add('tfgpu-gpu-failed');
    block.appendChild(line(gpu.error, 'error'));
  } else {
    block.appendChild(memoryMeter(gpu.memory, gpu.short, trans));
    block.appendChild(
      figures(gpu.memory, [
        [trans.__('util'), gpu.utilization, 'tfgpu-util'],
        ['', gpu.temperature, 'tfgpu-temp']
      ])
    );
    // In MIG mode NVML reports no utilization for the GPU either: memory only.
    const chart = actions.chart(gpu.historyKey, gpu.migLine === null, false, gpu.short);
    if (chart) {
      block.appendChild(chart);
    }
  }
  if (gpu.migLine) {
    block.appendChild(line(gpu.migLine, 'muted', 'tfgpu-mig-mode'));
  }
  if (gpu.mig.length) {
    block.classList.add('tfgpu-gpu-mig');
    const list = el('div', 'tfgpu-mig-list');
    for (const mig of gpu.mig) {
      list.appendChild(migBlock(mig, actions, trans));
    }
    block.appendChild(list);
  }
  // In MIG mode the processes are the MIG devices' (listed under each); the GPU lists none of its own.
  block.append(...processList(gpu, gpu.error === null && !gpu.migLine, actions, trans));
  return block;
}

/** The body of "All GPUs"; `historyNote` is the server's reason it keeps no chart history (or ""). */
export function renderServer(
  view: ServerView | null,
  actions: ServerActions,
  trans: TranslationBundle,
  historyNote = ''
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
  if (historyNote && view.problem === null) {
    out.appendChild(line(historyNote, 'muted', 'tfgpu-history-note'));
  }
  if (view.pidsNote && view.problem === null) {
    out.appendChild(line(view.pidsNote, 'muted', 'tfgpu-note tfgpu-pids-note'));
  }
  for (const report of view.problem === null ? view.kernelReports : []) {
    const node = line(report.text, 'muted', 'tfgpu-note tfgpu-kernel-report');
    node.dataset.kernelId = report.kernelId;
    out.appendChild(node);
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
