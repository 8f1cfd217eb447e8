import type { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { ServerConnection } from '@jupyterlab/services';
import type { TranslationBundle } from '@jupyterlab/translation';
import { Poll } from '@lumino/polling';
import { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import type { StartApplier } from './apply';
import { savedOf } from './apply';
import { NotebookLink } from './comm';
import { API_GPUS, DEFAULT_REFRESH_S, MAX_BACKOFF_MS, MAX_REFRESH_S, MIN_REFRESH_S, SIDEBAR_ID } from './constants';
import { gpuIcon } from './icon';
import {
  FrontNotebook,
  linkMessage,
  notebookView,
  refusedView,
  SavedSettings,
  serverProblem,
  serverView
} from './model';
import { el, line, renderNotebook, renderRefused, renderServer } from './render';
import { requestAPI } from './request';
import { SavedSection } from './saved';

export interface IGpuSidebarOptions {
  trans: TranslationBundle;
  /** The notebooks; without it the "This notebook" section is left out. */
  tracker: INotebookTracker | null;
  /** Applies the notebooks' saved settings at kernel start; the "Saved settings" section shows its state. */
  applier?: StartApplier | null;
  /** Opens a notebook by its server path (the `docmanager:open` command). */
  openNotebook(path: string): void;
  refreshInterval?: number;
}

/** Clamp a refresh interval (seconds) into what the settings schema allows. */
export function clampInterval(seconds: unknown): number {
  const value = typeof seconds === 'number' && Number.isFinite(seconds) ? seconds : DEFAULT_REFRESH_S;
  return Math.min(MAX_REFRESH_S, Math.max(MIN_REFRESH_S, value));
}

/**
 * The GPUs sidebar: "All GPUs" polled from the server extension, and "This notebook" from the front
 * notebook's kernel comm. Both re-render only when what they show changed, so a row keeps its focus
 * and hover between polls.
 */
export class GpuSidebar extends Widget {
  constructor(options: IGpuSidebarOptions) {
    super();
    this._trans = options.trans;
    this._tracker = options.tracker;
    this._applier = options.applier ?? null;
    this._openNotebook = options.openNotebook;
    const trans = this._trans;

    this.id = SIDEBAR_ID;
    this.addClass('tfgpu-sidebar');
    this.title.icon = gpuIcon;
    this.title.caption = trans.__('GPUs');

    const header = el('header', 'tfgpu-header', trans.__('GPUs'));
    this._serverStatus = el('div', 'tfgpu-status');
    this._serverBody = el('div', 'tfgpu-body');
    const server = el('section', 'tfgpu-section tfgpu-server');
    server.appendChild(el('h2', 'tfgpu-section-title', trans.__('All GPUs')));
    server.appendChild(this._serverStatus);
    server.appendChild(this._serverBody);
    this.node.appendChild(header);
    this.node.appendChild(server);

    this._notebookTitle = el('span', 'tfgpu-section-path');
    this._notebookStatus = el('div', 'tfgpu-status');
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

    this._renderServer();
    this._renderNotebook();

    const interval = clampInterval(options.refreshInterval ?? DEFAULT_REFRESH_S);
    this._poll = new Poll({
      auto: true,
      factory: () => this._fetch(),
      frequency: { interval: interval * 1000, backoff: true, max: MAX_BACKOFF_MS },
      name: 'tfgpu_magic:gpus',
      standby: () => !this.isVisible || 'when-hidden'
    });
  }

  /** Seconds between two polls of the server; applied at once. */
  set refreshInterval(seconds: number) {
    const interval = clampInterval(seconds) * 1000;
    if (this._poll.frequency.interval === interval) {
      return;
    }
    this._poll.frequency = { interval, backoff: true, max: MAX_BACKOFF_MS };
    if (this.isVisible) {
      void this._poll.refresh();
    }
  }

  get refreshInterval(): number {
    return this._poll.frequency.interval / 1000;
  }

  /** The front notebook's kernel link (null without a notebook); paused while the sidebar is hidden. */
  get link(): NotebookLink | null {
    return this._link;
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._poll.dispose();
    this._applier?.changed.disconnect(this._onApplied, this);
    this._setLink(null);
    this._saved?.dispose();
    super.dispose();
  }

  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    void this._poll.refresh();
    this._followFront();
  }

  protected onAfterHide(msg: Message): void {
    super.onAfterHide(msg);
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
    const refused = refusedView(link?.sections?.kernel, this._trans);
    if (refused.rows.length && refused.wanted) {
      return refused.wanted;
    }
    const saved = savedOf(panel, this._trans);
    return saved.kind === 'ok' ? saved.saved.settings : null;
  }

  private async _fetch(): Promise<void> {
    try {
      this._data = await requestAPI<unknown>(API_GPUS);
      this._problem = '';
    } catch (error) {
      const status = error instanceof ServerConnection.ResponseError ? error.response.status : null;
      this._problem = serverProblem(status, this._trans);
      this._renderServer();
      throw error; // the poll backs off
    }
    this._renderServer();
  }

  private _front(): FrontNotebook | null {
    const link = this._link;
    return link ? { path: link.path, kernelId: link.kernelId } : null;
  }

  private _renderServer(): void {
    const trans = this._trans;
    const view = this._data === undefined ? null : serverView(this._data, this._front(), trans);
    const key = JSON.stringify([view, this._problem]);
    if (key === this._serverKey) {
      return;
    }
    this._serverKey = key;
    this._serverStatus.replaceChildren(...(this._problem ? [line(this._problem, 'warn', 'tfgpu-offline')] : []));
    this._serverBody.replaceChildren(
      view === null && this._problem
        ? document.createDocumentFragment()
        : renderServer(view, { openNotebook: this._openNotebook }, trans)
    );
  }

  private _renderNotebook(): void {
    if (!this._tracker) {
      return;
    }
    const trans = this._trans;
    const link = this._link;
    const panel = this._tracker.currentWidget;
    const status = link ? link.status : null;
    const view = link ? notebookView(link.sections, trans) : null;
    const refused = refusedView(link?.sections?.kernel, trans);
    this._saved?.update(panel, link && link.panel === panel ? link : null);
    const key = JSON.stringify([panel ? panel.context.path : null, status, view, refused]);
    if (key === this._notebookKey) {
      return;
    }
    this._notebookKey = key;
    this._notebookTitle.textContent = panel ? panel.context.path : '';
    this._notebookTitle.title = panel ? panel.context.path : '';
    const statusNodes: HTMLElement[] = [];
    if (!panel) {
      statusNodes.push(line(trans.__('No notebook open.'), 'muted'));
    } else if (link) {
      const message = linkMessage(link.status, trans);
      if (message.text) {
        statusNodes.push(line(message.text, message.level, 'tfgpu-link-status'));
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
    this._notebookStatus.replaceChildren(...statusNodes);
    this._refused.replaceChildren(
      ...(refused.rows.length && panel
        ? [renderRefused(refused, settings => this._restartAndApply(panel, settings), trans)]
        : [])
    );
    this._notebookBody.replaceChildren(view ? renderNotebook(view, trans) : document.createDocumentFragment());
  }

  private _restartAndApply(panel: NotebookPanel, settings: SavedSettings): void {
    if (!this._applier) {
      return;
    }
    this._applier.restartAndApply(panel, settings).catch(error => {
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
    this._saved?.update(panel, link);
  }

  /** Follow the notebook in front: one comm at a time, paused while the sidebar is hidden. */
  private _followFront(): void {
    const panel: NotebookPanel | null = this._tracker?.currentWidget ?? null;
    if (this._link?.panel !== panel || this._link?.isDisposed) {
      const link = panel ? new NotebookLink(panel, !this.isVisible) : null;
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
  private _tracker: INotebookTracker | null;
  private _applier: StartApplier | null;
  private _saved: SavedSection | null;
  private _refused: HTMLDivElement;
  private _openNotebook: (path: string) => void;
  private _poll: Poll;
  private _data: unknown = undefined;
  private _problem = '';
  private _serverKey = '';
  private _notebookKey = '';
  private _link: NotebookLink | null = null;
  private _serverStatus: HTMLDivElement;
  private _serverBody: HTMLDivElement;
  private _notebookTitle: HTMLSpanElement;
  private _notebookStatus: HTMLDivElement;
  private _notebookBody: HTMLDivElement;
}
