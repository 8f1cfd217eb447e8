/**
 * The out-of-memory card (issue 36): JupyterLab's renderer of `application/vnd.tfgpu.oom+json`, the bundle the
 * kernel displays under a cell that raised TensorFlow's ResourceExhaustedError. It shows what model/oom.ts makes
 * of the data (what was asked, TensorFlow's figures, the settings in force, the GPU, who else holds memory, the
 * cause and the steps) and two buttons:
 *
 * - "Free memory" runs `%tfgpu free` in the kernel of the notebook that holds the card (not silent, no history:
 *   the notebook's execution counts do not move). Its report shows in the card, under the buttons, in
 *   JupyterLab's own output area (rich output as a cell shows it); it is not saved with the notebook.
 * - "Restart with <settings>" (only when the data suggests settings) asks first, naming the settings and the
 *   cells it will run again (Cancel is the default button). On accept it saves the settings in the notebook's
 *   metadata (over those saved already), records that the user agreed to them, and restarts the kernel: the
 *   saved-settings applier (apply.ts) applies them at that start, before anything else, as it does for the
 *   sidebar's "Restart kernel and apply". Then the code cells above the failing one run again
 *   (NotebookActions.runAllAbove); the failing cell does not.
 *
 * The card is "safe" in rendermime's sense: every text goes in with `textContent`. An output JupyterLab does not
 * trust (a notebook from elsewhere, opened here) shows the card without its buttons.
 */
import { Dialog, showDialog } from '@jupyterlab/apputils';
import type { Cell } from '@jupyterlab/cells';
import { INotebookTracker, NotebookActions, NotebookPanel } from '@jupyterlab/notebook';
import { OutputArea, OutputAreaModel } from '@jupyterlab/outputarea';
import type { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import type { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import type { TranslationBundle } from '@jupyterlab/translation';
import { PanelLayout, Widget } from '@lumino/widgets';

import { savedOf, StartApplier, writeSaved } from './apply';
import type { GpuFeed } from './feed';
import { canonicalSettings, Level, savedDocument, SavedSettings, SettingWords } from './model';
import {
  cellsAbove,
  CellsAbove,
  FREE_MEMORY_CODE,
  OOM_MIME_TYPE,
  OOM_RANK,
  OomRead,
  oomView,
  OomView,
  readOom,
  restartDoneText,
  restartQuestion,
  restartSettings
} from './model/oom';
import { el } from './render';

export interface IOomCardOptions {
  trans: TranslationBundle;
  /** Finds the notebook that holds a card (null: no notebooks in this host: no buttons work). */
  tracker: INotebookTracker | null;
  /** The saved settings' applier: a restart applies what the card saved (null: no notebooks). */
  applier: StartApplier | null;
  /** The server's answer: the settings a notebook can save (`settingWords`). */
  feed: GpuFeed;
  /** Renders the report of "Free memory" in the card. */
  rendermime: IRenderMimeRegistry;
}

/** The rendermime factory of the card, ranked before text/html (`OOM_RANK`). */
export function oomRendererFactory(options: IOomCardOptions): IRenderMime.IRendererFactory {
  return {
    safe: true,
    mimeTypes: [OOM_MIME_TYPE],
    defaultRank: OOM_RANK,
    createRenderer: () => new OomCard(options)
  };
}

/** What "Restart with ..." would do: the settings to save (`kept`: those saved already), the cells to run again. */
interface IRestartPlan {
  settings: { settings: SavedSettings; kept: SavedSettings };
  cells: CellsAbove;
  words: SettingWords;
}

/** A button styled as JupyterLab's, its accessible name its text. */
function button(text: string, className: string, title: string): HTMLButtonElement {
  const node = el('button', `jp-Button jp-mod-styled ${className}`, text, title);
  node.type = 'button';
  return node;
}

export class OomCard extends Widget implements IRenderMime.IRenderer {
  constructor(private readonly _options: IOomCardOptions) {
    super();
    const trans = _options.trans;
    this.addClass('tfgpu-oomcard');
    this.node.setAttribute('role', 'region');
    this.node.setAttribute('aria-label', trans.__('Out of memory'));
    const layout = new PanelLayout();
    this.layout = layout;
    this._content = new Widget();
    this._content.addClass('tfgpu-oomcard-content');
    this._report = new OutputArea({ model: new OutputAreaModel({ trusted: true }), rendermime: _options.rendermime });
    this._report.addClass('tfgpu-oomcard-report');
    this._report.hide();
    layout.addWidget(this._content);
    layout.addWidget(this._report);
    this._status = el('div', 'tfgpu-oomcard-status');
    this._status.setAttribute('role', 'status');
    this._status.setAttribute('aria-live', 'polite');
  }

  renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    this._read = readOom(model.data[OOM_MIME_TYPE], this._options.trans);
    this._trusted = model.trusted;
    this._render();
    return Promise.resolve();
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    const model = this._report.model;
    super.dispose(); // the report's output area with it
    model.dispose();
  }

  private _render(): void {
    const trans = this._options.trans;
    const node = this._content.node;
    const read = this._read;
    if (!read || read.kind !== 'ok') {
      node.replaceChildren(
        el('div', 'tfgpu-oomcard-title', trans.__('Out of memory')),
        el('div', 'tfgpu-oomcard-line tfgpu-oomcard-muted', read ? read.message : '')
      );
      return;
    }
    const view = oomView(read, trans);
    this._view = view;
    const parts: HTMLElement[] = [];

    const head = el('div', 'tfgpu-oomcard-head');
    head.appendChild(el('div', 'tfgpu-oomcard-title', view.title));
    head.appendChild(el('div', 'tfgpu-oomcard-summary', view.summary));
    parts.push(head);

    const table = el('table', 'tfgpu-oomcard-table');
    const body = el('tbody');
    for (const row of view.rows) {
      const tr = el('tr', `tfgpu-oomcard-row tfgpu-oomcard-${row.key}`);
      tr.dataset.key = row.key;
      tr.appendChild(el('th', '', row.label));
      tr.appendChild(el('td', row.na ? 'tfgpu-oomcard-na' : '', row.value, row.title));
      body.appendChild(tr);
    }
    table.appendChild(body);
    parts.push(table);

    if (view.holdersTitle !== null) {
      parts.push(el('div', 'tfgpu-oomcard-subheading', view.holdersTitle));
      if (view.holders.length) {
        const list = el('ul', 'tfgpu-oomcard-list tfgpu-oomcard-holders');
        for (const h of view.holders) {
          const item = el('li', `tfgpu-oomcard-item ${h.mine ? 'tfgpu-oomcard-mine' : ''}`.trim());
          item.appendChild(el('span', 'tfgpu-oomcard-item-label', h.text, h.text));
          item.appendChild(el('span', 'tfgpu-oomcard-item-figure', h.figure, h.title));
          list.appendChild(item);
        }
        parts.push(list);
      } else {
        parts.push(el('div', 'tfgpu-oomcard-line tfgpu-oomcard-muted', view.holdersEmpty));
      }
    }

    if (view.cause) {
      parts.push(el('div', 'tfgpu-oomcard-subheading', trans.__('Likely cause')));
      parts.push(el('div', 'tfgpu-oomcard-line tfgpu-oomcard-cause', view.cause));
    }
    if (view.steps.length) {
      parts.push(el('div', 'tfgpu-oomcard-subheading', trans.__('What to do')));
      const list = el('ol', 'tfgpu-oomcard-steps');
      for (const step of view.steps) {
        const item = el('li', 'tfgpu-oomcard-step');
        if (step.magic) {
          item.appendChild(el('code', 'tfgpu-oomcard-magic', step.magic));
          if (step.why) {
            item.appendChild(document.createTextNode(' \u2014 '));
          }
        }
        if (step.why) {
          item.appendChild(el('span', 'tfgpu-oomcard-why', step.why));
        }
        list.appendChild(item);
      }
      parts.push(list);
    }

    if (view.message) {
      const details = el('details', 'tfgpu-oomcard-details');
      details.appendChild(el('summary', '', trans.__("TensorFlow's message")));
      details.appendChild(el('div', 'tfgpu-oomcard-message', view.message));
      parts.push(details);
    }
    if (view.note) {
      parts.push(el('div', 'tfgpu-oomcard-line tfgpu-oomcard-muted', view.note));
    }
    // The buttons last: what they do shows under them (the status line, then the report of Free memory).
    if (this._trusted) {
      parts.push(this._buttons(view));
    } else {
      parts.push(
        el(
          'div',
          'tfgpu-oomcard-line tfgpu-oomcard-muted tfgpu-oomcard-untrusted',
          trans.__('No buttons: this output was not made in this page and the notebook is not trusted.')
        )
      );
    }
    parts.push(this._status);

    node.replaceChildren(...parts);
  }

  private _buttons(view: OomView): HTMLElement {
    const trans = this._options.trans;
    const box = el('div', 'tfgpu-oomcard-buttons');
    this._free = button(
      trans.__('Free memory'),
      'jp-mod-accept tfgpu-oomcard-free',
      trans.__("Run %1 in this notebook's kernel; its report shows here", FREE_MEMORY_CODE)
    );
    this._free.addEventListener('click', () => void this._runFree());
    box.appendChild(this._free);
    this._restart = null;
    const restart = view.restart;
    if (restart) {
      this._restart = button(
        restart.label,
        'tfgpu-danger tfgpu-oomcard-restart',
        trans.__(
          'Save %1 in this notebook, restart the kernel (its variables are lost) and run the cells above this one again; asks first',
          restart.words
        )
      );
      this._restart.addEventListener('click', () => void this._runRestart());
      box.appendChild(this._restart);
    }
    this._setBusy(this._busy);
    return box;
  }

  private _setBusy(busy: boolean): void {
    this._busy = busy;
    for (const node of [this._free, this._restart]) {
      if (node) {
        node.disabled = busy;
      }
    }
  }

  private _say(text: string, level: Level | 'muted' = 'info'): void {
    this._status.className = `tfgpu-oomcard-status tfgpu-oomcard-${level}`;
    this._status.textContent = text;
  }

  /** The notebook that holds this card (null: none: an output view of its own, or no notebooks here). */
  private _panel(): NotebookPanel | null {
    return this._options.tracker?.find(panel => panel.node.contains(this.node)) ?? null;
  }

  /** The cell whose output this card is. */
  private _cell(panel: NotebookPanel): Cell | null {
    return panel.content.widgets.find(cell => cell.node.contains(this.node)) ?? null;
  }

  private _cellsAbove(panel: NotebookPanel, cell: Cell): CellsAbove | null {
    const index = panel.content.widgets.indexOf(cell);
    return index < 0 ? null : cellsAbove(panel.content.widgets.map(c => c.model.type), index);
  }

  /** "Free memory": `%tfgpu free` in the notebook's kernel, its report in the card. */
  private async _runFree(): Promise<void> {
    const trans = this._options.trans;
    const panel = this._panel();
    const kernel = panel?.sessionContext.session?.kernel ?? null;
    if (!panel || !kernel) {
      this._say(
        panel
          ? trans.__('No kernel: start this notebook’s kernel first.')
          : trans.__('This card is not in an open notebook: open its notebook to use its buttons.'),
        'error'
      );
      return;
    }
    this._setBusy(true);
    this._say(trans.__('Running %1…', FREE_MEMORY_CODE), 'info');
    this._report.show();
    try {
      const future = kernel.requestExecute({
        code: FREE_MEMORY_CODE,
        silent: false,
        store_history: false,
        allow_stdin: false,
        stop_on_error: false
      });
      this._report.future = future;
      const reply = await future.done;
      const content = reply?.content;
      if (content?.status === 'ok') {
        this._say(trans.__("%1 ran in this notebook's kernel:", FREE_MEMORY_CODE), 'ok');
      } else if (content?.status === 'error') {
        this._say(trans.__('%1 failed: %2: %3', FREE_MEMORY_CODE, content.ename, content.evalue), 'error');
      } else {
        this._say(trans.__('%1 did not finish (the kernel was interrupted or restarted).', FREE_MEMORY_CODE), 'warn');
      }
    } catch (error) {
      this._say(trans.__('%1 did not run: %2', FREE_MEMORY_CODE, String(error)), 'error');
    } finally {
      this._setBusy(false);
    }
  }

  /** The setting words, asked of the server now where no answer named them yet. */
  private async _settingWords(): Promise<SettingWords | null> {
    const feed = this._options.feed;
    if (!feed.settingWords) {
      await feed.refresh().catch(() => undefined);
    }
    return feed.settingWords;
  }

  /**
   * What "Restart with ..." would do now: the document to save and the cells to run, or why it cannot (said in
   * the card).
   */
  private async _restartPlan(
    panel: NotebookPanel,
    cell: Cell,
    suggested: NonNullable<OomView['restart']>
  ): Promise<IRestartPlan | null> {
    const trans = this._options.trans;
    const words = await this._settingWords();
    if (!words) {
      this._say(
        trans.__(
          "Nothing saved: the server has not named the settings a notebook can save (is tfgpu_magic's server extension on?)."
        ),
        'error'
      );
      return null;
    }
    const saved = savedOf(panel, words, trans);
    if (saved.kind !== 'ok' && saved.kind !== 'none') {
      // Never overwrite what this page cannot read (a newer version's, a bad value): say it instead.
      this._say(trans.__("Nothing saved: the notebook's saved settings cannot be read: %1", saved.message), 'error');
      return null;
    }
    const settings = restartSettings(saved.kind === 'ok' ? saved.saved.settings : {}, suggested.settings, words, trans);
    if (!settings.ok) {
      this._say(trans.__('Nothing saved: %1', settings.message), 'error');
      return null;
    }
    const cells = this._cellsAbove(panel, cell);
    if (!cells) {
      return null;
    }
    return { settings, cells, words };
  }

  /** "Restart with ...": ask, save, restart (the start applies them), run the cells above. */
  private async _runRestart(): Promise<void> {
    const { trans, applier } = this._options;
    const suggested = this._view?.restart ?? null;
    const panel = this._panel();
    const cell = panel ? this._cell(panel) : null;
    if (!suggested) {
      return;
    }
    if (!panel || !cell || !applier) {
      this._say(trans.__('This card is not in an open notebook: open its notebook to use its buttons.'), 'error');
      return;
    }
    this._setBusy(true);
    try {
      const plan = await this._restartPlan(panel, cell, suggested);
      if (!plan) {
        return;
      }
      const question = restartQuestion(suggested.settings, plan.settings.kept, plan.cells, trans);
      const body = el('div', 'tfgpu-oomcard-question');
      for (const paragraph of question.body) {
        body.appendChild(el('p', '', paragraph));
      }
      const answer = await showDialog({
        title: question.title,
        body: new Widget({ node: body }),
        buttons: [
          Dialog.cancelButton({ label: trans.__('Cancel') }),
          Dialog.warnButton({ label: question.accept, className: 'tfgpu-danger' })
        ],
        defaultButton: 0 // Enter cancels: the restart loses the kernel's variables
      });
      if (!answer.button.accept || panel.isDisposed) {
        return;
      }
      // What the user agreed to is what is done: a notebook changed while the question was open is asked again.
      const now = await this._restartPlan(panel, cell, suggested);
      if (!now) {
        return;
      }
      if (
        JSON.stringify(now.cells) !== JSON.stringify(plan.cells) ||
        canonicalSettings(now.settings.settings) !== canonicalSettings(plan.settings.settings)
      ) {
        this._say(trans.__('Nothing done: the notebook changed while the question was open. Press the button again.'), 'warn');
        return;
      }
      const document = savedDocument(plan.settings.settings, true, plan.words);
      writeSaved(panel, document);
      // The user's own settings: known agreed in this page at once, so the start applies them without asking.
      void applier.agree(panel, document);
      if (!panel.sessionContext.session?.kernel) {
        this._say(
          trans.__('Saved %1 in the notebook; it has no kernel: start one, and the settings apply at its start.', suggested.words),
          'warn'
        );
        return;
      }
      this._say(trans.__('Restarting the kernel with %1…', suggested.words), 'info');
      // The SessionContext's restart (not its dialog: ours asked already); its 'restarting' status has the
      // applier send the saved settings first, before the cells below.
      await panel.sessionContext.restartKernel();
      let ran = true;
      const index = panel.content.widgets.indexOf(cell);
      if (plan.cells.code.length && index > 0) {
        const notebook = panel.content;
        notebook.deselectAll();
        notebook.activeCellIndex = index;
        ran = await NotebookActions.runAllAbove(notebook, panel.sessionContext);
      }
      this._say(restartDoneText(suggested.words, plan.cells, ran, trans), ran ? 'ok' : 'warn');
    } catch (error) {
      console.error('tfgpu_magic: restarting with the suggested settings failed', error);
      this._say(trans.__('Restarting the kernel failed: %1', String(error)), 'error');
    } finally {
      this._setBusy(false);
    }
  }

  private _content: Widget;
  private _report: OutputArea;
  private _status: HTMLDivElement;
  private _read: OomRead | null = null;
  private _view: OomView | null = null;
  private _trusted = false;
  private _busy = false;
  private _free: HTMLButtonElement | null = null;
  private _restart: HTMLButtonElement | null = null;
}
