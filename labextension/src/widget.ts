import type { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import type { TranslationBundle } from '@jupyterlab/translation';
import { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import { renderServer, ServerActions } from './allgpus';
import type { StartApplier } from './apply';
import { savedOf } from './apply';
import { NotebookLink } from './comm';
import { CullerNotices, renderCuller } from './culler';
import { KernelDeaths, renderDeaths } from './deaths';
import { SIDEBAR_ID } from './constants';
import type { GpuFeed } from './feed';
import { GpuChart } from './gpuchart';
import { gpuIcon } from './icon';
import {
  chartFigures,
  chartView,
  FrontNotebook,
  linkMessage,
  notebookView,
  pausedLine,
  pageSettingWords,
  refusedView,
  SavedSettings,
  sameSettingWords,
  SettingWords,
  ServerTrouble,
  serverTrouble,
  ServerView,
  serverView,
  shutdownPlan,
  ShutdownTarget,
  Words
} from './model';
import { el, keepFocus, line, renderNotebook, renderRefused, titleClipped } from './render';
import { IFirstCellVerdict, SavedSection, writeCheckedFirstCell } from './saved';
import { confirmShutdown } from './shutdown';

/** How long the line on a failed shut-down stays. */
const ACTION_ERROR_MS = 30000;

/** The sidebar's name among the feed's readers. */
const READER = 'sidebar';

export interface IGpuSidebarOptions {
  trans: TranslationBundle;
  /** The server's answer, polled once for the page (the status-bar item reads it too). */
  feed: GpuFeed;
  /** The notebooks; without it the "This notebook" section is left out. */
  tracker: INotebookTracker | null;
  /** Applies the notebooks' saved settings at kernel start; the "Saved settings" section shows its state. */
  applier?: StartApplier | null;
  /** Opens a notebook by its server path (the `docmanager:open` command). */
  openNotebook(path: string): void;
  /**
   * Shut a kernel of this server down (the app's own kernel API, as JupyterLab's Running panel does); without
   * it the rows offer no "Shut down".
   */
  shutdownKernel?: (kernelId: string) => Promise<void>;
  /** The GPU-aware culler's warnings (with "Keep running") and shut-down kernels, listed at the top. */
  culler?: CullerNotices | null;
}

/**
 * The GPUs sidebar: "All GPUs" from the server's answer (the feed, which it needs while shown), and "This
 * notebook" from the front notebook's kernel comm. Both re-render only when what they show changed, so a row
 * keeps its focus and hover between answers.
 */
export class GpuSidebar extends Widget {
  constructor(options: IGpuSidebarOptions) {
    super();
    this._trans = options.trans;
    this._feed = options.feed;
    this._tracker = options.tracker;
    this._applier = options.applier ?? null;
    this._openNotebook = options.openNotebook;
    this._shutdownKernel = options.shutdownKernel ?? null;
    this._culler = options.culler ?? null;
    const trans = this._trans;

    this.id = SIDEBAR_ID;
    this.addClass('tfgpu-sidebar');
    this.title.icon = gpuIcon;
    this.title.caption = trans.__('GPUs');

    const header = el('header', 'tfgpu-header', trans.__('GPUs'));
    this._serverStatus = el('div', 'tfgpu-status');
    // The lines on the server's state (not answering, a failed shut-down): said once when they change. The
    // figures refreshed every few seconds are not live: no chatter.
    this._serverStatus.setAttribute('aria-live', 'polite');
    this._serverBody = el('div', 'tfgpu-body');
    const server = el('section', 'tfgpu-section tfgpu-server');
    server.appendChild(el('h2', 'tfgpu-section-title', trans.__('All GPUs')));
    server.appendChild(this._serverStatus);
    server.appendChild(this._serverBody);
    // The culler's warnings and the kernels it shut down: above everything, as they ask for a decision.
    this._cullerSlot = el('div', 'tfgpu-culler');
    this._cullerSlot.setAttribute('aria-live', 'polite');
    // Kernels that died holding GPU memory (deaths.ts): which notebook, when, what it held, the likely cause.
    this._deaths = new KernelDeaths(this._feed);
    this._deathSlot = el('div', 'tfgpu-deaths tfgpu-empty');
    this._deathSlot.setAttribute('aria-live', 'polite');
    this._deaths.changed.connect(this._renderDeaths, this);
    this._renderDeaths();
    this.node.appendChild(header);
    this.node.appendChild(this._deathSlot);
    this.node.appendChild(this._cullerSlot);
    this.node.appendChild(server);
    // The user is here: the feed asks at the usual interval for a while, however idle the kernels are.
    this.node.addEventListener('pointerdown', () => this._feed.wake());
    this.node.addEventListener('keydown', () => this._feed.wake());

    this._notebookTitle = el('span', 'tfgpu-section-path');
    this._notebookStatus = el('div', 'tfgpu-status');
    this._notebookStatus.setAttribute('aria-live', 'polite');
    this._refused = el('div', 'tfgpu-refused-slot');
    this._notebookBody = el('div', 'tfgpu-body');
    this._saved = null;
    if (this._tracker) {
      const section = el('section', 'tfgpu-section tfgpu-this-notebook');
      const title = el('h2', 'tfgpu-section-title', trans.__('This notebook'));
      title.appendChild(this._notebookTitle);
      section.appendChild(title);
      section.appendChild(this._notebookStatus);
      section.appendChild(this._refused);
      section.appendChild(this._notebookBody);
      this.node.appendChild(section);
      this._saved = new SavedSection(trans, this._applier);
      this.node.appendChild(this._saved.node);
      this._tracker.currentChanged.connect(this._followFront, this);
      this._applier?.changed.connect(this._onApplied, this);
      // The link follows the front notebook even while the sidebar is hidden (paused, the kernel samples
      // nothing for it): its refusals and the kernel's requests still reach the commands.
      this._followFront();
    }

    this._feed.changed.connect(this._onFeed, this);
    this._culler?.changed.connect(this._renderCuller, this);
    this._renderCuller();
    this._takeFeed();
    this._renderServer();
    this._renderNotebook();
  }

  /** The front notebook's kernel link (null without a notebook); paused while the sidebar is hidden. */
  get link(): NotebookLink | null {
    return this._link;
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._feed.changed.disconnect(this._onFeed, this);
    this._culler?.changed.disconnect(this._renderCuller, this);
    this._deaths.dispose();
    this._feed.need(READER, false);
    clearTimeout(this._actionErrorTimer);
    this._applier?.changed.disconnect(this._onApplied, this);
    this._setLink(null);
    this._saved?.dispose();
    super.dispose();
  }

  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    this._feed.wake(); // the usual interval, however idle the kernels are
    this._feed.need(READER, true); // a fresh answer at once
    this._followFront();
    this._scheduleTitles();
  }

  protected onResize(msg: Widget.ResizeMessage): void {
    super.onResize(msg);
    this._scheduleTitles();
  }

  /** Once the browser has laid the last render out: a tooltip with the full text on whatever it clipped. */
  private _scheduleTitles(): void {
    if (this._titlesScheduled) {
      return;
    }
    this._titlesScheduled = true;
    requestAnimationFrame(() => {
      this._titlesScheduled = false;
      if (!this.isDisposed && this.isVisible) {
        titleClipped(this.node);
      }
    });
  }

  protected onAfterHide(msg: Message): void {
    super.onAfterHide(msg);
    this._feed.need(READER, false);
    // A hidden sidebar asks the kernel to sample nothing for it; the comm stays open.
    if (this._link) {
      this._link.paused = true;
    }
  }

  /**
   * The settings "Restart kernel and apply" would use for the front notebook: the kernel's `wanted` when it
   * refused something as too late, else the notebook's saved settings (null: neither).
   */
  restartSettings(): SavedSettings | null {
    const panel = this._tracker?.currentWidget ?? null;
    if (!panel) {
      return null;
    }
    const link = this._link && this._link.panel === panel ? this._link : null;
    const words = this._settingWordsOf(link);
    const refused = refusedView(link?.sections?.kernel, words, this._trans);
    if (refused.rows.length && refused.wanted) {
      return refused.wanted;
    }
    const saved = savedOf(panel, words, this._trans);
    return saved.kind === 'ok' ? saved.saved.settings : null;
  }

  /** The kernel comm of `panel` when the sidebar follows it (null: another notebook is in front). */
  linkOf(panel: NotebookPanel): NotebookLink | null {
    return this._link?.panel === panel ? this._link : null;
  }

  /** Bring the saved settings of the notebook in front into view (a notice's "Show in GPUs sidebar"). */
  showSaved(): void {
    this._saved?.node.scrollIntoView?.({ block: 'start' });
  }

  /** The settings the front notebook can save, as the sidebar reads them (null: not named yet). */
  settingWords(): SettingWords | null {
    return this._settingWordsOf(this._link);
  }

  /**
   * "Write as first cell" for `panel`, once the kernel checked its saved values: through the "Saved settings"
   * section (which shows the verdict) when it shows that notebook.
   */
  writeFirstCell(panel: NotebookPanel): Promise<IFirstCellVerdict> {
    if (this._saved && this._tracker?.currentWidget === panel) {
      return this._saved.writeFirstCell();
    }
    const link = this._link?.panel === panel ? this._link : null;
    return writeCheckedFirstCell(panel, link, this._settingWordsOf(link), this._trans);
  }

  /** A new answer, or a failed request: "All GPUs", its charts, and what the saved settings are read with. */
  private _onFeed(): void {
    const settingWords = this._feed.settingWords;
    this._takeFeed();
    if (!this._renderServer()) {
      this._updateCharts();
    }
    if (!sameSettingWords(settingWords, this._settingWords)) {
      this._settingWords = settingWords;
      this._renderNotebook(); // the saved settings can be read (their section's editor) now
    }
  }

  /** What every render of this answer reads: read once per answer. */
  private _takeFeed(): void {
    const failure = this._feed.failure;
    this._trouble = failure ? serverTrouble(failure.status, this._trans) : null;
  }

  /**
   * The chart of one GPU or MIG device (`device`: its name in the chart's text, "GPU 0"), kept across renders;
   * null where the server keeps no history.
   */
  private _chart(key: string | null, utilization: boolean, small: boolean, device: string): HTMLElement | null {
    const history = this._feed.history;
    const now = this._feed.serverNow;
    if (key === null || history === null || !history.sampling || now === null) {
      return null;
    }
    // A GPU that enters MIG mode (after a reset) stops reporting utilization: its chart is another one then.
    const slot = `${key} ${utilization}`;
    let kept = this._charts.get(slot);
    if (!kept) {
      kept = { chart: new GpuChart(this._trans, utilization, small), key, utilization, device };
      this._charts.set(slot, kept);
    }
    kept.device = device;
    this._drawChart(kept);
    return kept.chart.node;
  }

  /** A chart's view of the history now, drawn and told as text. */
  private _drawChart(kept: { chart: GpuChart; key: string; utilization: boolean; device: string }): void {
    const history = this._feed.history;
    const now = this._feed.serverNow;
    if (history === null || now === null) {
      return;
    }
    const { key, utilization } = kept;
    const view = chartView(key, history, now, { utilization, words: this._wordsOf(null) }, this._trans);
    kept.chart.update(view, chartFigures(view, history.series[key], kept.device, this._trans));
  }

  /** New samples into the charts on screen, without rebuilding the rows around them. */
  private _updateCharts(): void {
    const history = this._feed.history;
    const now = this._feed.serverNow;
    for (const [slot, kept] of this._charts) {
      if (!kept.chart.node.isConnected || history === null || now === null) {
        this._charts.delete(slot); // its GPU is gone (or the history): a new chart if it comes back
        continue;
      }
      this._drawChart(kept);
    }
  }

  private async _shutdown(target: ShutdownTarget): Promise<void> {
    const shutdownKernel = this._shutdownKernel;
    if (!shutdownKernel || this._shuttingDown.has(target.kernelId)) {
      return;
    }
    const trans = this._trans;
    const plan = shutdownPlan(this._view, target.kernelId, trans) ?? { ...target, frees: '' };
    if (!(await confirmShutdown(plan, trans))) {
      return;
    }
    this._setActionError('');
    this._shuttingDown.add(target.kernelId);
    this._renderServer();
    try {
      await shutdownKernel(target.kernelId);
    } catch (error) {
      const reason = error instanceof Error && error.message ? error.message : String(error);
      this._setActionError(trans.__('Could not shut down the kernel of %1: %2', plan.name, reason));
    } finally {
      this._shuttingDown.delete(target.kernelId);
    }
    this._renderServer();
    // At once, not at the next tick: the row goes with this answer.
    void this._feed.refresh();
  }

  private _setActionError(text: string): void {
    clearTimeout(this._actionErrorTimer);
    this._actionError = text;
    if (text) {
      this._actionErrorTimer = setTimeout(() => this._setActionError(''), ACTION_ERROR_MS);
    }
    this._renderServer();
  }

  private _front(): FrontNotebook | null {
    const link = this._link;
    return link ? { path: link.path, kernelId: link.kernelId } : null;
  }

  /** The culler's lines at the top (warnings with "Keep running", shut-down kernels), if it is on this page. */
  private _renderCuller(): void {
    const culler = this._culler;
    const nodes = culler ? renderCuller(culler, this._trans) : [];
    keepFocus(this._cullerSlot, () => this._cullerSlot.replaceChildren(...nodes));
    this._cullerSlot.classList.toggle('tfgpu-empty', nodes.length === 0);
    this._scheduleTitles();
  }

  /** The lines on kernels that died holding GPU memory, at the top. */
  private _renderDeaths(): void {
    const nodes = renderDeaths(this._deaths, this._trans);
    keepFocus(this._deathSlot, () => this._deathSlot.replaceChildren(...nodes));
    this._deathSlot.classList.toggle('tfgpu-empty', nodes.length === 0);
  }

  /** Render "All GPUs" if what it shows changed; true when it did. */
  private _renderServer(): boolean {
    const trans = this._trans;
    const data = this._feed.data;
    const view = data === undefined ? null : serverView(data, this._front(), trans);
    this._view = view;
    const history = this._feed.history;
    const charts = history !== null && history.sampling;
    const historyNote =
      history !== null && !history.sampling
        ? history.note || trans.__('The server keeps no history of the GPUs: no charts.')
        : '';
    const trouble = this._trouble;
    const key = JSON.stringify([view, trouble, this._actionError, charts, historyNote, [...this._shuttingDown]]);
    if (key === this._serverKey) {
      return false;
    }
    this._serverKey = key;
    const status: HTMLElement[] = [];
    if (trouble) {
      status.push(line(trouble.text, 'warn', 'tfgpu-offline'));
      if (trouble.reload) {
        const reload = el('button', 'jp-Button jp-mod-styled jp-mod-accept tfgpu-reload', trans.__('Reload page'));
        reload.type = 'button';
        reload.addEventListener('click', () => window.location.reload());
        status.push(reload);
      }
    }
    if (this._actionError) {
      status.push(line(this._actionError, 'error', 'tfgpu-shutdown-error'));
    }
    keepFocus(this._serverStatus, () => this._serverStatus.replaceChildren(...status));
    const actions: ServerActions = {
      openNotebook: this._openNotebook,
      chart: (key, utilization, small, device) => this._chart(key, utilization, small, device),
      shuttingDown: kernelId => this._shuttingDown.has(kernelId)
    };
    if (this._shutdownKernel) {
      actions.shutdown = target => {
        this._shutdown(target).catch(error => console.error('tfgpu_magic: shutting the kernel down failed', error));
      };
    }
    // The render inside keepFocus: it moves the kept charts (a focused table toggle among them) into the new rows.
    keepFocus(this._serverBody, () =>
      this._serverBody.replaceChildren(
        view === null && trouble ? document.createDocumentFragment() : renderServer(view, actions, trans, historyNote)
      )
    );
    this._scheduleTitles();
    return true;
  }

  private _renderNotebook(): void {
    if (!this._tracker) {
      return;
    }
    const trans = this._trans;
    const link = this._link;
    const panel = this._tracker.currentWidget;
    const status = link ? link.status : null;
    const words = this._wordsOf(link);
    const view = link ? notebookView(link.sections, trans, words) : null;
    const settingWords = this._settingWordsOf(link);
    const refused = refusedView(link?.sections?.kernel, settingWords, trans);
    // The start's apply loads tfgpu_magic; while it runs (a saved --wait may take minutes) "not loaded" is not
    // the news, and a Load cell would only wait behind it.
    const applying = !!panel && this._applier?.state(panel)?.kind === 'applying';
    this._saved?.update(panel, link && link.panel === panel ? link : null, words, settingWords);
    this._scheduleTitles();
    const paused = link && link.status === 'connected' ? link.kernelPaused : null;
    const key = JSON.stringify([panel ? panel.context.path : null, status, view, refused, applying, paused]);
    if (key === this._notebookKey) {
      return;
    }
    this._notebookKey = key;
    this._notebookTitle.textContent = panel ? panel.context.path : '';
    this._notebookTitle.title = panel ? panel.context.path : '';
    const statusNodes: HTMLElement[] = [];
    if (!panel) {
      statusNodes.push(line(trans.__('No notebook open.'), 'muted'));
    } else if (link && applying && (link.status === 'not-loaded' || link.status === 'closed')) {
      statusNodes.push(
        line(trans.__('tfgpu_magic loads with the saved settings, once they are applied.'), 'info', 'tfgpu-link-status')
      );
    } else if (link) {
      const message = linkMessage(link.status, trans);
      if (message.text) {
        statusNodes.push(line(message.text, message.level, 'tfgpu-link-status'));
      }
      if (paused !== null) {
        // The kernel stopped its live pushes (idle that long): the figures below are as of then.
        statusNodes.push(line(pausedLine(paused, trans), 'muted', 'tfgpu-link-paused'));
      }
      if (message.canLoad) {
        const button = el('button', 'jp-Button jp-mod-styled jp-mod-accept tfgpu-load', trans.__('Load tfgpu_magic'));
        button.title = trans.__('Insert a cell with %1 at the top of the notebook and run it', '%load_ext tfgpu_magic');
        button.addEventListener('click', () => {
          button.disabled = true;
          link.loadExtension().catch(error => console.error('tfgpu_magic: loading the extension failed', error));
        });
        statusNodes.push(button);
      }
    }
    keepFocus(this._notebookStatus, () => this._notebookStatus.replaceChildren(...statusNodes));
    keepFocus(this._refused, () =>
      this._refused.replaceChildren(
        ...(refused.rows.length && panel
          ? [renderRefused(refused, settings => this._restartAndApply(panel, settings), trans)]
          : [])
      )
    );
    this._notebookBody.replaceChildren(view ? renderNotebook(view, trans) : document.createDocumentFragment());
  }

  private _restartAndApply(panel: NotebookPanel, settings: SavedSettings): void {
    if (!this._applier) {
      return;
    }
    const link = this._link?.panel === panel ? this._link : null;
    this._applier.restartAndApply(panel, settings, this._settingWordsOf(link), { link }).catch(error => {
      console.error('tfgpu_magic: restarting the kernel to apply the settings failed', error);
    });
  }

  private _onApplied(_: StartApplier, panel: NotebookPanel): void {
    const link = this._link;
    if (!link || link.panel !== panel) {
      return;
    }
    // The apply loads the extension: a comm the kernel closed before (not loaded yet) can open now.
    const state = this._applier?.state(panel);
    if (state?.kind === 'done' && (link.status === 'not-loaded' || link.status === 'closed')) {
      link.open();
    }
    this._renderNotebook(); // the saved-settings section, and the link's line while the apply runs
  }

  /**
   * The words for states and missing values: the kernel's (its comm's last state), else the server's (its last
   * answer: the same package's words), else none (each key reads as itself).
   */
  private _wordsOf(link: NotebookLink | null): Words | null {
    return link?.words ?? this._feed.words;
  }

  /** The settings a notebook can save (model/words.ts `pageSettingWords`: the server's, else the kernel's). */
  private _settingWordsOf(link: NotebookLink | null): SettingWords | null {
    return pageSettingWords(this._feed.settingWords, link?.kernelSettingWords);
  }

  /** Follow the notebook in front: one comm at a time, paused while the sidebar is hidden. */
  private _followFront(): void {
    const panel: NotebookPanel | null = this._tracker?.currentWidget ?? null;
    if (this._link?.panel !== panel || this._link?.isDisposed) {
      const link = panel ? new NotebookLink(panel, !this.isVisible, () => this._feed.settingWords) : null;
      this._setLink(link);
    } else if (this._link) {
      this._link.paused = !this.isVisible;
    }
    this._renderNotebook();
    this._renderServer();
  }

  private _setLink(link: NotebookLink | null): void {
    if (this._link) {
      this._link.dispose();
    }
    this._link = link;
    if (link) {
      link.changed.connect(this._onLinkChanged, this);
      link.requested.connect(this._onKernelRequest, this);
    }
  }

  /** The kernel's panel asked to restart and apply these settings: the same as our button, dialog included. */
  private _onKernelRequest(link: NotebookLink, settings: SavedSettings): void {
    if (link === this._link && !link.panel.isDisposed) {
      this._restartAndApply(link.panel, settings);
    }
  }

  private _onLinkChanged(link: NotebookLink): void {
    if (link !== this._link) {
      return;
    }
    this._renderNotebook();
    this._renderServer(); // the front kernel may have changed: its mark follows
  }

  private _trans: TranslationBundle;
  private _feed: GpuFeed;
  private _tracker: INotebookTracker | null;
  private _applier: StartApplier | null;
  private _saved: SavedSection | null;
  private _refused: HTMLDivElement;
  private _openNotebook: (path: string) => void;
  private _shutdownKernel: ((kernelId: string) => Promise<void>) | null;
  private _culler: CullerNotices | null;
  private _cullerSlot: HTMLDivElement;
  private _deaths: KernelDeaths;
  private _deathSlot: HTMLDivElement;
  private _titlesScheduled = false;
  /** The server's setting words the sections were last rendered with. */
  private _settingWords: SettingWords | null = null;
  private _view: ServerView | null = null;
  private _trouble: ServerTrouble | null = null;
  /** The charts on screen, by series key and kind (with utilization or memory only). */
  private _charts = new Map<string, { chart: GpuChart; key: string; utilization: boolean; device: string }>();
  private _shuttingDown = new Set<string>();
  private _actionError = '';
  private _actionErrorTimer: ReturnType<typeof setTimeout> | undefined = undefined;
  private _serverKey = '';
  private _notebookKey = '';
  private _link: NotebookLink | null = null;
  private _serverStatus: HTMLDivElement;
  private _serverBody: HTMLDivElement;
  private _notebookTitle: HTMLSpanElement;
  private _notebookStatus: HTMLDivElement;
  private _notebookBody: HTMLDivElement;
}
