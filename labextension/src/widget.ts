import type { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { ServerConnection } from '@jupyterlab/services';
import type { TranslationBundle } from '@jupyterlab/translation';
import { Poll } from '@lumino/polling';
import { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import { NotebookLink } from './comm';
import { API_GPUS, DEFAULT_REFRESH_S, MAX_BACKOFF_MS, MAX_REFRESH_S, MIN_REFRESH_S, SIDEBAR_ID } from './constants';
import { gpuIcon } from './icon';
import { FrontNotebook, linkMessage, notebookView, serverProblem, serverView } from './model';
import { el, line, renderNotebook, renderServer } from './render';
import { requestAPI } from './request';

export interface IGpuSidebarOptions {
  trans: TranslationBundle;
  /** The notebooks; without it the "This notebook" section is left out. */
  tracker: INotebookTracker | null;
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
    this._notebookBody = el('div', 'tfgpu-body');
    if (this._tracker) {
      const section = el('section', 'tfgpu-section tfgpu-this-notebook');
      const title = el('h2', 'tfgpu-section-title', trans.__('This notebook'));
      title.appendChild(this._notebookTitle);
      section.appendChild(title);
      section.appendChild(this._notebookStatus);
      section.appendChild(this._notebookBody);
      this.node.appendChild(section);
      this._tracker.currentChanged.connect(this._followFront, this);
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

  /** The front notebook's kernel link (null without a notebook, or while the sidebar is hidden). */
  get link(): NotebookLink | null {
    return this._link;
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._poll.dispose();
    this._setLink(null);
    super.dispose();
  }

  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    void this._poll.refresh();
    this._followFront();
  }

  protected onAfterHide(msg: Message): void {
    super.onAfterHide(msg);
    // A hidden sidebar asks nothing of the kernel: the comm is opened again when it shows.
    this._setLink(null);
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
    const key = JSON.stringify([panel ? panel.context.path : null, status, view]);
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
    this._notebookBody.replaceChildren(view ? renderNotebook(view, trans) : document.createDocumentFragment());
  }

  /** Follow the notebook in front: one comm at a time, and only while the sidebar shows. */
  private _followFront(): void {
    const panel: NotebookPanel | null = this._tracker?.currentWidget ?? null;
    const wanted = this.isVisible ? panel : null;
    if (this._link?.panel !== wanted || this._link?.isDisposed) {
      this._setLink(wanted ? new NotebookLink(wanted) : null);
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
