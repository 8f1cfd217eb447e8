import { NotebookActions, NotebookPanel } from '@jupyterlab/notebook';
import type { Kernel, KernelMessage, Session } from '@jupyterlab/services';
import { ISignal, Signal } from '@lumino/signaling';

import { COMM_OPEN_DATA, COMM_PAUSE, COMM_RESUME, COMM_TARGET, commPage, LOAD_EXTENSION_SOURCE } from './constants';
import {
  LinkStatus,
  lostSubshell,
  mergeMessage,
  messageSettingWords,
  messageWords,
  pageSettingWords,
  parseKernelRequest,
  parseValidated,
  pausedReason,
  PendingRequests,
  SavedSettings,
  Sections,
  SettingWords,
  Validated,
  Words
} from './model';
import { currentLanguage } from './request';

export type { LinkStatus };

/** The statuses in which a finished cell may have loaded the extension, so the comm is opened again. */
const RETRY_AFTER_CELL: ReadonlySet<LinkStatus> = new Set<LinkStatus>(['not-loaded', 'closed', 'loading']);

/** Whether the browser tab is hidden (`document.visibilityState`). */
function pageHidden(): boolean {
  return typeof document !== 'undefined' && document.visibilityState === 'hidden';
}

/** Why a `validate` request got no answer. */
export class LinkClosedError extends Error {}

/**
 * How long a `validate` waits for its answer before it is sent again (same id: the first answer counts). With
 * ipykernel 7 and JupyterLab 4.6 comm messages run on a kernel subshell beside the cell, so an answer is quick;
 * one can still be lost (a kernel that had not yet handled the comm's opening drops the message).
 */
const RESEND_MS = 5000;

/**
 * The kernel comm of one notebook: opens `tfgpu` with a subscribe request, merges the kernel's `state`
 * and `changes` messages, and opens it again when the kernel changes, restarts, or after a cell ran while
 * the extension was not loaded. While the sidebar is hidden it stays open, paused (the kernel samples
 * nothing for it). It asks the kernel to check saved settings (`validate`) and passes on the kernel's
 * requests (`requested`). It tells the kernel whether the page is shown (`{"request": "page", "visible"}`, from
 * `document.visibilityState`): the kernel pauses its live pushes while no page of it is, and says so when it pauses
 * them (`{"type": "paused"}`, `kernelPaused`) until its next `state`. It never executes anything in the kernel
 * except the visible cell of `loadExtension()`.
 */
export class NotebookLink {
  /**
   * `paused`: open the comm paused (the sidebar is hidden). `serverSettingWords`: the server's names of the
   * settings, which the kernel's requests are read with first (model/words.ts `pageSettingWords`).
   */
  constructor(
    readonly panel: NotebookPanel,
    paused = false,
    private readonly _serverSettingWords: () => SettingWords | null = () => null
  ) {
    this._paused = paused;
    const context = panel.sessionContext;
    context.kernelChanged.connect(this._onKernelChanged, this);
    context.statusChanged.connect(this._onStatusChanged, this);
    panel.context.pathChanged.connect(this._emit, this);
    panel.disposed.connect(this.dispose, this);
    NotebookActions.executed.connect(this._onExecuted, this);
    document.addEventListener('visibilitychange', this._onVisibility);
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

  /** Emitted when the kernel asks the sidebar to restart it and apply these settings (its panel's button). */
  get requested(): ISignal<this, SavedSettings> {
    return this._requested;
  }

  get status(): LinkStatus {
    return this._status;
  }

  /** Whether the kernel's comm answers, so `validate` can be asked. */
  get canValidate(): boolean {
    return this._comm !== null && this._status === 'connected';
  }

  /** Paused: the kernel stops sampling for this comm (the sidebar is hidden); resumed, it sends a full state. */
  get paused(): boolean {
    return this._paused;
  }

  set paused(paused: boolean) {
    if (paused === this._paused) {
      return;
    }
    this._paused = paused;
    if (this._opened) {
      this._send(paused ? COMM_PAUSE : COMM_RESUME);
    }
    // Not opened yet: the first message sends the pause then (see `open`).
  }

  /**
   * Ask the kernel whether these settings would be accepted (its magics' own parsing; nothing is applied).
   * Rejects with LinkClosedError when the comm is not connected or closes before the answer.
   */
  validate(settings: SavedSettings): Promise<Validated> {
    const comm = this._comm;
    if (!comm || !this.canValidate) {
      return Promise.reject(new LinkClosedError('the kernel comm is not connected'));
    }
    return this._pending.ask(
      id => ({ request: 'validate', id, settings }),
      request => this._send(request as { [key: string]: any }),
      () => new LinkClosedError('the kernel comm is not connected')
    );
  }

  /**
   * The kernel's words for settings' states, TensorFlow's state and missing values (its last state message's
   * `words`); null until then, or from a kernel that sends none (each key then reads as itself).
   */
  get words(): Words | null {
    return this._words;
  }

  /**
   * The settings a notebook can save as the kernel names them (its last state message's `setting_words`); null
   * until then, or from an older kernel that sends none.
   */
  get kernelSettingWords(): SettingWords | null {
    return this._settingWords;
  }

  /**
   * Why the kernel paused its live pushes ("idle": idle `live_pause_after` seconds; "hidden": no page of it shown),
   * from its `paused` message until its next `state`; null while it pushes.
   */
  get kernelPaused(): string | null {
    return this._kernelPaused;
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

  /**
   * Open (or open again) the comm to the notebook's current kernel. `keepRequests`: the `validate` requests waiting
   * are sent again on the new comm rather than failed (the old one lost its subshell, see `_send`).
   */
  open(keepRequests = false): void {
    if (this._isDisposed) {
      return;
    }
    this._closeComm();
    this._sections = null;
    this._words = null;
    this._settingWords = null;
    this._kernelPaused = null;
    if (!keepRequests) {
      this._rejectPending();
    }
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
    this._opened = false;
    comm.onMsg = (msg: KernelMessage.ICommMsgMsg) => {
      if (this._comm !== comm) {
        return;
      }
      received = true;
      if (!this._opened) {
        // The kernel has handled the opening: from now on it hears what is sent. A request sent before (the
        // main shell busy with a cell, the comm's messages on a subshell) could be dropped: the pause goes now.
        this._opened = true;
        if (this._paused) {
          this._send(COMM_PAUSE);
        }
        if (pageHidden()) {
          this._send(commPage(false)); // again: the one sent with the opening may have been dropped
        }
      }
      const data = msg.content.data;
      const paused = pausedReason(data);
      if (paused !== null) {
        this._kernelPaused = paused;
        this._setStatus('connected');
        return;
      }
      if ((data as { type?: unknown } | null)?.type === 'state') {
        this._kernelPaused = null; // pushing again
      }
      const validated = parseValidated(data);
      if (validated) {
        this._pending.answer(validated.id, validated);
        this._setStatus('connected');
        return;
      }
      const request = parseKernelRequest(data, pageSettingWords(this._serverSettingWords(), this._settingWords));
      if (request) {
        this._setStatus('connected');
        this._requested.emit(request.settings);
        return;
      }
      this._sections = mergeMessage(this._sections, data);
      const words = messageWords(data);
      if (words !== undefined) {
        this._words = words;
      }
      const settingWords = messageSettingWords(data);
      if (settingWords !== undefined) {
        this._settingWords = settingWords;
      }
      this._setStatus('connected');
    };
    comm.onClose = () => {
      if (this._comm !== comm) {
        return;
      }
      this._comm = null;
      this._rejectPending();
      // ipykernel closes a comm to an unregistered target at once, without a message.
      this._sections = received ? this._sections : null;
      this._setStatus(received ? 'closed' : 'not-loaded');
    };
    this._setStatus('connecting');
    try {
      // Canceled (the future rejects) when the kernel restarts before it is handled: nothing to do then.
      // JupyterLab's language: the kernel's words and messages (its refusals too) follow it from now on.
      const language = currentLanguage();
      comm.open(language ? { ...COMM_OPEN_DATA, language } : COMM_OPEN_DATA).done.catch(() => undefined);
    } catch (error) {
      console.warn('tfgpu_magic: cannot open the kernel comm', error);
      this._comm = null;
      this._setStatus('closed');
      return;
    }
    if (pageHidden()) {
      // Opened while the page is hidden (a kernel restarted in a background tab): the kernel hears it at once.
      this._send(commPage(false));
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
    document.removeEventListener('visibilitychange', this._onVisibility);
    this._closeComm();
    this._rejectPending();
    Signal.clearData(this);
  }

  /** The page was hidden or shown again: the kernel pauses its pushes while no page of it is shown. */
  private _onVisibility = (): void => {
    if (this._comm !== null) {
      this._send(commPage(!pageHidden()));
    }
  };

  private _onKernelChanged(_: unknown, args: Session.ISessionConnection.IKernelChangedArgs): void {
    this._closeComm(args.oldValue);
    this.open();
  }

  private _onStatusChanged(_: unknown, status: Kernel.Status): void {
    if (status === 'restarting' || status === 'autorestarting' || status === 'dead') {
      // The kernel connection disposes its comms on a restart, without calling onClose.
      this._comm = null;
      this._sections = null;
      this._rejectPending();
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

  /** Send on the open comm; false when there is none (or the kernel is gone). */
  private _send(data: { [key: string]: any }): boolean {
    const comm = this._comm;
    if (!comm || comm.isDisposed) {
      return false;
    }
    try {
      const future = comm.send(data);
      future.onReply = reply => {
        // JupyterLab sends a comm's messages on a subshell shared by its target, and deletes that subshell when
        // the target's last comm closes, after a wait: a comm opened just after a close (the link opened again)
        // can be handed the subshell being deleted. The kernel then drops every message sent on it, answering
        // each with UnknownSubshellError, and a `validate` would wait forever: a new comm gets a subshell of its
        // own.
        if (this._comm === comm && lostSubshell(reply.content)) {
          console.warn('tfgpu_magic: the kernel comm lost its subshell; opening it again');
          this.open(true);
        }
      };
      future.done.catch(() => undefined);
      return true;
    } catch (error) {
      console.warn('tfgpu_magic: cannot send on the kernel comm', error);
      return false;
    }
  }

  private _rejectPending(): void {
    this._pending.rejectAll(() => new LinkClosedError('the kernel comm closed before it answered'));
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
  private _words: Words | null = null;
  private _settingWords: SettingWords | null = null;
  private _status: LinkStatus = 'connecting';
  private _kernelPaused: string | null = null;
  private _isDisposed = false;
  private _paused = false;
  /** The kernel sent its first message on the current comm: it has handled the opening. */
  private _opened = false;
  private _pending = new PendingRequests<Validated>(RESEND_MS);
  private _changed = new Signal<this, void>(this);
  private _requested = new Signal<this, SavedSettings>(this);
}
