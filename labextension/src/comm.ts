import { NotebookActions, NotebookPanel } from '@jupyterlab/notebook';
import type { Kernel, KernelMessage, Session } from '@jupyterlab/services';
import { ISignal, Signal } from '@lumino/signaling';

import { COMM_OPEN_DATA, COMM_TARGET, LOAD_EXTENSION_SOURCE } from './constants';
import { LinkStatus, mergeMessage, Sections } from './model';

export type { LinkStatus };

/** The statuses in which a finished cell may have loaded the extension, so the comm is opened again. */
const RETRY_AFTER_CELL: ReadonlySet<LinkStatus> = new Set<LinkStatus>(['not-loaded', 'closed', 'loading']);

/**
 * The kernel comm of one notebook: opens `tfgpu` with a subscribe request, merges the kernel's `state`
 * and `changes` messages, and opens it again when the kernel changes, restarts, or after a cell ran while
 * the extension was not loaded. It never executes anything in the kernel except the visible cell of
 * `loadExtension()`.
 */
export class NotebookLink {
  constructor(readonly panel: NotebookPanel) {
    const context = panel.sessionContext;
    context.kernelChanged.connect(this._onKernelChanged, this);
    context.statusChanged.connect(this._onStatusChanged, this);
    panel.context.pathChanged.connect(this._emit, this);
    panel.disposed.connect(this.dispose, this);
    NotebookActions.executed.connect(this._onExecuted, this);
    this.open();
    void context.ready.then(() => {
      if (!this._isDisposed && this._status === 'starting') {
        this.open();
      }
    });
  }

  /** Emitted whenever the status, the sections or the notebook's path change. */
  get changed(): ISignal<this, void> {
    return this._changed;
  }

  get status(): LinkStatus {
    return this._status;
  }

  /** The kernel's sections as merged so far; null until its first message. */
  get sections(): Sections | null {
    return this._sections;
  }

  get path(): string {
    return this.panel.context.path;
  }

  get kernelId(): string | null {
    return this.panel.sessionContext.session?.kernel?.id ?? null;
  }

  get isDisposed(): boolean {
    return this._isDisposed;
  }

  /** Open (or open again) the comm to the notebook's current kernel. */
  open(): void {
    if (this._isDisposed) {
      return;
    }
    this._closeComm();
    this._sections = null;
    const kernel = this.panel.sessionContext.session?.kernel ?? null;
    if (!kernel || kernel.isDisposed) {
      const context = this.panel.sessionContext;
      this._setStatus(context.isReady || context.isDisposed || context.hasNoKernel ? 'no-kernel' : 'starting');
      return;
    }
    let comm: Kernel.IComm;
    try {
      comm = kernel.createComm(COMM_TARGET);
    } catch (error) {
      console.warn('tfgpu_magic: cannot create the kernel comm', error);
      this._setStatus('closed');
      return;
    }
    let received = false;
    this._comm = comm;
    comm.onMsg = (msg: KernelMessage.ICommMsgMsg) => {
      if (this._comm !== comm) {
        return;
      }
      received = true;
      this._sections = mergeMessage(this._sections, msg.content.data);
      this._setStatus('connected');
    };
    comm.onClose = () => {
      if (this._comm !== comm) {
        return;
      }
      this._comm = null;
      // ipykernel closes a comm to an unregistered target at once, without a message.
      this._sections = received ? this._sections : null;
      this._setStatus(received ? 'closed' : 'not-loaded');
    };
    this._setStatus('connecting');
    try {
      // Canceled (the future rejects) when the kernel restarts before it is handled: nothing to do then.
      comm.open(COMM_OPEN_DATA).done.catch(() => undefined);
    } catch (error) {
      console.warn('tfgpu_magic: cannot open the kernel comm', error);
      this._comm = null;
      this._setStatus('closed');
    }
  }

  /**
   * Put `%load_ext tfgpu_magic` in a code cell at the top of the notebook (or reuse the top cell if it
   * already says exactly that), run it, then open the comm again.
   */
  async loadExtension(): Promise<void> {
    const notebook = this.panel.content;
    if (this._isDisposed || !notebook.model) {
      return;
    }
    this._setStatus('loading');
    const first = notebook.widgets[0];
    const reuse =
      first !== undefined &&
      first.model.type === 'code' &&
      first.model.sharedModel.getSource().trim() === LOAD_EXTENSION_SOURCE;
    notebook.activeCellIndex = 0;
    if (!reuse) {
      NotebookActions.insertAbove(notebook);
      if (notebook.activeCell && notebook.activeCell.model.type !== 'code') {
        NotebookActions.changeCellType(notebook, 'code');
      }
      notebook.activeCell?.model.sharedModel.setSource(LOAD_EXTENSION_SOURCE);
    }
    notebook.deselectAll();
    try {
      await NotebookActions.run(notebook, this.panel.sessionContext);
    } finally {
      if (!this._isDisposed && RETRY_AFTER_CELL.has(this._status)) {
        this.open();
      }
    }
  }

  dispose(): void {
    if (this._isDisposed) {
      return;
    }
    this._isDisposed = true;
    this._closeComm();
    Signal.clearData(this);
  }

  private _onKernelChanged(_: unknown, args: Session.ISessionConnection.IKernelChangedArgs): void {
    this._closeComm(args.oldValue);
    this.open();
  }

  private _onStatusChanged(_: unknown, status: Kernel.Status): void {
    if (status === 'restarting' || status === 'autorestarting' || status === 'dead') {
      // The kernel connection disposes its comms on a restart, without calling onClose.
      this._comm = null;
      this._sections = null;
      this._setStatus(status === 'dead' ? 'dead' : 'restarting');
    } else if ((status === 'idle' || status === 'busy') && (this._status === 'restarting' || this._status === 'dead')) {
      this.open();
    }
  }

  private _onExecuted(_: unknown, args: { notebook: unknown }): void {
    if (args.notebook === this.panel.content && RETRY_AFTER_CELL.has(this._status) && this._status !== 'loading') {
      // The cell may have been `%load_ext tfgpu_magic`, typed by the user.
      this.open();
    }
  }

  /** Close our comm, if any, quietly (its kernel may already be gone). */
  private _closeComm(kernel?: Kernel.IKernelConnection | null): void {
    const comm = this._comm;
    this._comm = null;
    if (!comm || comm.isDisposed || (kernel && kernel.isDisposed)) {
      return;
    }
    comm.onMsg = () => undefined;
    comm.onClose = () => undefined;
    try {
      comm.close().done.catch(() => undefined);
    } catch {
      // The kernel is disposed or dead: the comm goes with it.
    }
  }

  private _setStatus(status: LinkStatus): void {
    this._status = status;
    this._emit();
  }

  private _emit(): void {
    if (!this._isDisposed) {
      this._changed.emit();
    }
  }

  private _comm: Kernel.IComm | null = null;
  private _sections: Sections | null = null;
  private _status: LinkStatus = 'connecting';
  private _isDisposed = false;
  private _changed = new Signal<this, void>(this);
}
