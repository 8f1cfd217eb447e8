import { Dialog, showDialog } from '@jupyterlab/apputils';
import type { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import type { Kernel, KernelMessage, Session } from '@jupyterlab/services';
import type { IStateDB } from '@jupyterlab/statedb';
import type { TranslationBundle } from '@jupyterlab/translation';
import type { ReadonlyPartialJSONObject } from '@lumino/coreutils';
import type { CommandRegistry } from '@lumino/commands';
import { ISignal, Signal } from '@lumino/signaling';

import { CommandIDs, CONSENT_KEY, METADATA_KEY } from './constants';
import {
  APPLY_USER_EXPRESSION,
  applyCode,
  ApplyState,
  CellTrust,
  ConsentBook,
  consentEntry,
  ConsentEntry,
  emptyConsentBook,
  notebookTrusted,
  parseApplyReply,
  readConsentBook,
  readSaved,
  recordConsent,
  SavedDocument,
  SavedRead,
  SavedSettings,
  savedDocument,
  settingsKey,
  startDecision
} from './model';

/** What the applier keeps per notebook. */
interface IRecord {
  state: ApplyState | null;
  /** The execute request in flight (sent at the last kernel start), and its kernel. */
  future: Kernel.IShellFuture<KernelMessage.IExecuteRequestMsg, KernelMessage.IExecuteReplyMsg> | null;
  kernel: Kernel.IKernelConnection | null;
  /** Counts the applies sent: an answer to an older one is not shown. */
  generation: number;
  /** A send is scheduled for the end of the current task (see `_schedule`). */
  scheduled: boolean;
  /** The next start comes from our "Restart kernel and apply". */
  restartRequested: boolean;
}

/** The notebook's cells as trust sees them (model/consent.ts `notebookTrusted`). */
export function cellTrust(panel: NotebookPanel): CellTrust[] {
  const cells: CellTrust[] = [];
  for (const cell of panel.model?.cells ?? []) {
    cells.push({ type: cell.type, trusted: cell.trusted, hasCode: cell.sharedModel.getSource().trim() !== '' });
  }
  return cells;
}

/**
 * The user's answers about untrusted notebooks' saved settings, kept in JupyterLab's state database (the
 * workspace, which the server keeps: other browsers of the same workspace share it; `/lab?reset` and
 * another workspace start from none). Read once; without a state database (or until it answers), only
 * for this page.
 */
export class ConsentStore {
  constructor(private readonly _db: IStateDB | null) {
    this.ready = (_db ? _db.fetch(CONSENT_KEY) : Promise.resolve(undefined))
      .then(
        raw => {
          this._book = readConsentBook(raw);
        },
        error => console.warn('tfgpu_magic: cannot read the remembered answers about saved settings', error)
      )
      .then(() => {
        this._loaded = true;
      });
  }

  /** Resolves once the stored answers are read (or could not be). */
  readonly ready: Promise<void>;

  get loaded(): boolean {
    return this._loaded;
  }

  entry(path: string): ConsentEntry | null {
    return consentEntry(this._book, path);
  }

  /** Remember the answer for these settings of this notebook (stored at once; an unchanged one is not). */
  record(path: string, settings: string, agreed: boolean): void {
    if (!this._loaded) {
      // Recorded into the book that is being read, not over it.
      void this.ready.then(() => this.record(path, settings, agreed));
      return;
    }
    const current = this.entry(path);
    if (current && current.settings === settings && current.agreed === agreed) {
      return;
    }
    this._book = recordConsent(this._book, path, settings, agreed);
    this._db
      ?.save(CONSENT_KEY, this._book as unknown as ReadonlyPartialJSONObject)
      .catch(error => console.warn('tfgpu_magic: cannot store the answer about saved settings', error));
  }

  private _book: ConsentBook = emptyConsentBook();
  private _loaded = false;
}

/** The notebook's saved settings, read from its model (kind `none` without a model). */
export function savedOf(panel: NotebookPanel, trans?: TranslationBundle): SavedRead {
  const model = panel.model;
  return model ? readSaved(model.getMetadata(METADATA_KEY), trans) : { kind: 'none' };
}

/** Write the saved settings into the notebook's metadata (JupyterLab then saves them with the notebook). */
export function writeSaved(panel: NotebookPanel, document: SavedDocument | null): void {
  const model = panel.model;
  if (!model) {
    return;
  }
  if (document === null) {
    model.deleteMetadata(METADATA_KEY);
  } else {
    // A copy: the model keeps what it is given, and the caller's object may change later.
    model.setMetadata(METADATA_KEY, JSON.parse(JSON.stringify(document)));
  }
}

export interface IStartApplierOptions {
  /** Where the user's answers about untrusted notebooks are kept; without it, for this page only. */
  state?: IStateDB | null;
  /** The application's commands: JupyterLab's "Trust Notebook" counts as agreeing to the saved settings. */
  commands?: CommandRegistry | null;
}

/**
 * Applies the saved settings of every open notebook at each start of its kernel: the first one when the
 * notebook opens, a change of kernel, a restart (ours, JupyterLab's, or the server's automatic one).
 *
 * The code goes out silently, before anything else: the kernel connection queues what is sent while the
 * kernel (re)starts and sends it in order once the kernel answers, so the apply runs before any cell the
 * user (or "Restart Kernel and Run All Cells") sends afterwards. A notebook without `metadata.tfgpu`, or
 * with `apply_on_start` off, is never sent anything.
 *
 * A notebook JupyterLab does not trust is not sent its settings until the user agrees ("Apply saved
 * settings" in the sidebar, or JupyterLab's "Trust Notebook"); the answer is remembered per notebook path
 * and saved settings (model/consent.ts `startDecision`). Settings the user wrote here (Check & save,
 * Restart kernel and apply) count as agreed to.
 */
export class StartApplier {
  constructor(
    private readonly _tracker: INotebookTracker,
    private readonly _trans: TranslationBundle,
    options: IStartApplierOptions = {}
  ) {
    this._consent = new ConsentStore(options.state ?? null);
    this._commands = options.commands ?? null;
    this._commands?.commandExecuted.connect(this._onCommand, this);
    _tracker.forEach(panel => this._watch(panel));
    _tracker.widgetAdded.connect((_, panel) => this._watch(panel), this);
  }

  /** Emitted with the notebook whose apply state changed (and after an apply's answer, so a comm may open). */
  get changed(): ISignal<this, NotebookPanel> {
    return this._changed;
  }

  /** The last apply of this notebook's saved settings (null: none was sent, or none is saved). */
  state(panel: NotebookPanel): ApplyState | null {
    return this._records.get(panel)?.state ?? null;
  }

  /**
   * Save these settings with apply_on_start on, after the user confirms the restart, restart the kernel, and
   * let the start apply them. Resolves false when the user cancels (nothing is saved then).
   */
  async restartAndApply(panel: NotebookPanel, settings: SavedSettings, note?: string): Promise<boolean> {
    const trans = this._trans;
    const question = trans.__("Restart the kernel and apply the saved settings? The kernel's variables are lost.");
    const answer = await showDialog({
      title: trans.__('Restart kernel and apply'),
      body: note ? `${question} ${note}` : question,
      buttons: [
        Dialog.cancelButton({ label: trans.__('Cancel') }),
        Dialog.warnButton({ label: trans.__('Restart and apply'), className: 'tfgpu-danger' })
      ]
    });
    if (!answer.button.accept || panel.isDisposed) {
      return false;
    }
    writeSaved(panel, savedDocument(settings, true));
    const record = this._record(panel);
    const kernel = panel.sessionContext.session?.kernel ?? null;
    if (!kernel) {
      record.state = { kind: 'skipped', message: trans.__('this notebook has no kernel: start one, and the settings apply at its start') };
      this._changed.emit(panel);
      return true;
    }
    this.agree(panel, savedDocument(settings, true));
    record.restartRequested = true;
    // The SessionContext's restart (not its dialog: ours asked already) keeps JupyterLab's own view of the
    // kernel right; the 'restarting' status it emits schedules the apply (see _onStatusChanged).
    await panel.sessionContext.restartKernel();
    return true;
  }

  /**
   * The user's "Apply saved settings": remember that they agree to this notebook's saved settings, and send
   * them to the running kernel the way a start does. A kernel that has run cells already answers that they
   * apply at its next start.
   */
  applyWithConsent(panel: NotebookPanel): void {
    const record = this._records.get(panel);
    if (!record) {
      return;
    }
    const before = record.state;
    this._send(panel, record, true);
    if (record.state === before) {
      this._changed.emit(panel); // nothing sent (no kernel now): the question stays, its button usable again
    }
  }

  /** The user wrote these settings here (Check & save, Restart kernel and apply): they need no question. */
  agree(panel: NotebookPanel, document: SavedDocument): void {
    this._consent.record(panel.context.path, settingsKey(document), true);
  }

  dispose(): void {
    this._commands?.commandExecuted.disconnect(this._onCommand, this);
    Signal.clearData(this);
  }

  /**
   * JupyterLab's "Trust Notebook" ran: once it trusted the notebook (and saved it), the user has agreed to
   * its saved settings too. They apply at its next kernel start; "Apply saved settings" still applies them now.
   */
  private _onCommand(_: CommandRegistry, args: CommandRegistry.ICommandExecutedArgs): void {
    if (args.id !== CommandIDs.trustNotebook) {
      return;
    }
    const panel = this._tracker.currentWidget; // the notebook the command acts on, unless told another
    void Promise.resolve(args.result)
      .then((result: unknown) => {
        const trusted = (result as { trusted?: unknown } | null)?.trusted === true;
        const record = panel ? this._records.get(panel) : undefined;
        // The command trusts every cell of the notebook it acted on: a notebook not all trusted was another one.
        if (!panel || !record || !trusted || !panel.model || ![...panel.model.cells].every(cell => cell.trusted)) {
          return;
        }
        const saved = savedOf(panel, this._trans);
        if (saved.kind !== 'ok') {
          return;
        }
        this.agree(panel, saved.saved);
        if (record.state?.kind === 'consent') {
          this._setState(panel, record, { ...record.state, trustedNow: true });
        }
      })
      .catch(() => undefined); // the command failed or was cancelled: nothing was trusted
  }

  private _watch(panel: NotebookPanel): void {
    if (this._records.has(panel)) {
      return;
    }
    this._records.set(panel, {
      state: null,
      future: null,
      kernel: null,
      generation: 0,
      scheduled: false,
      restartRequested: false
    });
    const context = panel.sessionContext;
    context.kernelChanged.connect(this._onKernelChanged, this);
    context.statusChanged.connect(this._onStatusChanged, this);
    panel.disposed.connect(() => {
      context.kernelChanged.disconnect(this._onKernelChanged, this);
      context.statusChanged.disconnect(this._onStatusChanged, this);
      this._records.delete(panel);
    });
    // The tracker may learn of a notebook after its kernel started.
    if (context.session?.kernel) {
      this._schedule(panel);
    }
  }

  private _panelOf(sessionContext: unknown): NotebookPanel | null {
    return this._tracker.find(panel => panel.sessionContext === sessionContext) ?? null;
  }

  private _onKernelChanged(sender: unknown, args: Session.ISessionConnection.IKernelChangedArgs): void {
    // A restart through the SessionContext also emits kernelChanged, with the same kernel: its 'restarting'
    // status has scheduled the apply already.
    if (!args.newValue || args.newValue === args.oldValue) {
      return;
    }
    const panel = this._panelOf(sender);
    if (panel) {
      this._schedule(panel);
    }
  }

  private _onStatusChanged(sender: unknown, status: Kernel.Status): void {
    if (status === 'restarting' || status === 'autorestarting') {
      const panel = this._panelOf(sender);
      if (panel) {
        this._schedule(panel);
      }
    }
  }

  /**
   * Send the apply at the end of the current task, in a microtask. A restart emits 'restarting' before it
   * clears the kernel connection's queue and marks it restarting, in the same task: sent at once, the request
   * would reach the old kernel, or be dropped with the queue. One microtask later it lands in the queue that
   * is sent to the new kernel first, still before anything the user can send (a click is a later task).
   */
  private _schedule(panel: NotebookPanel): void {
    const record = this._records.get(panel);
    if (!record || record.scheduled) {
      return;
    }
    record.scheduled = true;
    void Promise.resolve().then(() => {
      record.scheduled = false;
      this._send(panel, record);
    });
  }

  /** Send the saved settings to the kernel: at a start (`consented` false), or for "Apply saved settings". */
  private _send(panel: NotebookPanel, record: IRecord, consented = false): void {
    if (panel.isDisposed || !this._records.has(panel)) {
      return;
    }
    const kernel = panel.sessionContext.session?.kernel ?? null;
    if (!kernel || kernel.isDisposed || kernel.status === 'dead') {
      return;
    }
    // Already queued for this start (a restart emits 'restarting' more than once): one apply is enough.
    if (record.future && !record.future.isDisposed && record.kernel === kernel) {
      return;
    }
    const afterRestart = record.restartRequested;
    record.restartRequested = false;
    const saved = savedOf(panel, this._trans);
    // The user's button applies what is saved even with apply_on_start turned off since the question.
    if (saved.kind === 'none' || (saved.kind === 'ok' && !saved.saved.apply_on_start && !consented)) {
      // Never anything sent for such a notebook; an old state no longer says anything true.
      this._setState(panel, record, null);
      return;
    }
    if (saved.kind !== 'ok') {
      // apply_on_start cannot be read from a document we do not understand: say so, send nothing.
      this._setState(panel, record, { kind: 'skipped', message: saved.message });
      return;
    }
    const path = panel.context.path;
    const key = settingsKey(saved.saved);
    if (consented) {
      this._consent.record(path, key, true);
    } else {
      if (!this._consent.loaded) {
        // Only right after the page loads, before the workspace's state is read: decide once it is.
        record.restartRequested = afterRestart;
        void this._consent.ready.then(() => this._schedule(panel));
        return;
      }
      const trusted = notebookTrusted(cellTrust(panel));
      if (startDecision(trusted, this._consent.entry(path), key) === 'ask') {
        this._consent.record(path, key, false);
        this._setState(panel, record, { kind: 'consent', settings: saved.saved.settings, trustedNow: false });
        return;
      }
    }
    let future: Kernel.IShellFuture<KernelMessage.IExecuteRequestMsg, KernelMessage.IExecuteReplyMsg>;
    try {
      future = kernel.requestExecute(
        {
          code: applyCode(saved.saved),
          silent: true,
          store_history: false,
          stop_on_error: false,
          allow_stdin: false,
          user_expressions: { tfgpu: APPLY_USER_EXPRESSION }
        },
        true
      );
    } catch (error) {
      console.warn('tfgpu_magic: cannot send the saved settings to the kernel', error);
      this._setState(panel, record, { kind: 'done', reply: { kind: 'interrupted' }, afterRestart, kernelName: '' });
      return;
    }
    const generation = ++record.generation;
    record.future = future;
    record.kernel = kernel;
    const kernelName = panel.sessionContext.kernelDisplayName;
    const settings = saved.saved.settings;
    this._setState(panel, record, { kind: 'applying', afterRestart, settings, consented });
    future.done
      .then(
        reply => parseApplyReply(reply?.content, this._trans),
        () => parseApplyReply(null, this._trans) // canceled: the kernel restarted or died before it answered
      )
      .then(reply => {
        if (record.generation !== generation || !this._records.has(panel)) {
          return; // a newer start's apply speaks for this notebook now
        }
        record.future = null;
        this._setState(panel, record, { kind: 'done', reply, afterRestart, kernelName, settings, consented });
      })
      .catch(error => console.error('tfgpu_magic: reading the apply reply failed', error));
  }

  private _setState(panel: NotebookPanel, record: IRecord, state: ApplyState | null): void {
    record.state = state;
    this._changed.emit(panel);
  }

  private _record(panel: NotebookPanel): IRecord {
    this._watch(panel);
    return this._records.get(panel)!;
  }

  private _records = new Map<NotebookPanel, IRecord>();
  private _changed = new Signal<this, NotebookPanel>(this);
  private _consent: ConsentStore;
  private _commands: CommandRegistry | null;
}
