import { Dialog, Notification, showDialog } from '@jupyterlab/apputils';
import type { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import type { Kernel, KernelMessage, Session } from '@jupyterlab/services';
import type { TranslationBundle } from '@jupyterlab/translation';
import { ISignal, Signal } from '@lumino/signaling';
import { Widget } from '@lumino/widgets';

import { LinkClosedError, type NotebookLink } from './comm';
import { API_CONSENT, METADATA_KEY } from './constants';
import type { GpuFeed } from './feed';
import {
  APPLY_USER_EXPRESSION,
  applyCode,
  ApplyState,
  consentRequest,
  hasSettings,
  parseApplyReply,
  readConsentAnswer,
  readSaved,
  RestartPlan,
  restartPlan,
  SavedDocument,
  SavedRead,
  SavedSettings,
  savedDocument,
  SettingWords,
  settingsKey,
  startRefusalNotice,
  Validated,
  waitProgress
} from './model';
import { el } from './render';
import { requestAPI } from './request';

/** What the applier keeps per notebook. */
interface IRecord {
  state: ApplyState | null;
  /** The execute request in flight (sent at the last kernel start), and its kernel. */
  future: Kernel.IShellFuture<KernelMessage.IExecuteRequestMsg, KernelMessage.IExecuteReplyMsg> | null;
  kernel: Kernel.IKernelConnection | null;
  /** Counts the applies sent: an answer to an older one is not shown. */
  generation: number;
  /** Counts the starts decided: a server's answer about consent for an older one decides nothing. */
  decision: number;
  /** The apply (its generation) the user cancelled; 0: none. */
  cancelled: number;
  /** A send is scheduled for the end of the current task (see `_schedule`). */
  scheduled: boolean;
  /** The next start comes from our "Restart kernel and apply". */
  restartRequested: boolean;
  /** A send waits for the server to name the settings (`consented`: the user's button sent it). */
  waiting: { consented: boolean } | null;
}

/**
 * The user's agreement to notebooks' saved settings, as the server keeps it for the user (POST tfgpu/api/consent;
 * model/consent.ts says why there). What the server said agreed, and what the user agreed to in this page, is
 * remembered for the page, so a restart decides at once (see `StartApplier._send`); anything else is asked of
 * the server each time. A server that cannot answer (no server extension: 404) counts as not agreed.
 */
export class ConsentClient {
  /** Whether these settings of the notebook at `path` are known agreed in this page. */
  known(path: string, saved: SavedDocument): boolean {
    return this._agreed.get(path) === settingsKey(saved);
  }

  /** Whether the user agreed to these settings of the notebook at `path` (false when the server cannot say). */
  async agreed(path: string, saved: SavedDocument): Promise<boolean> {
    if (this.known(path, saved)) {
      return true;
    }
    const agreed = await this._ask(path, saved, false);
    if (agreed) {
      this._agreed.set(path, settingsKey(saved));
    }
    return agreed;
  }

  /**
   * Record that the user agrees to (or wrote) these settings of the notebook at `path`: known agreed in this page
   * at once; resolves true once the server keeps it (false: other pages will ask).
   */
  agree(path: string, saved: SavedDocument): Promise<boolean> {
    this._agreed.set(path, settingsKey(saved));
    return this._ask(path, saved, true);
  }

  private async _ask(path: string, saved: SavedDocument, agree: boolean): Promise<boolean> {
    try {
      const answer = await requestAPI<unknown>(API_CONSENT, {
        method: 'POST',
        body: JSON.stringify(consentRequest(path, saved, agree))
      });
      const agreed = readConsentAnswer(answer);
      if (agree && !agreed) {
        console.warn('tfgpu_magic: the server did not keep the agreement to the saved settings', answer);
      }
      return agreed;
    } catch (error) {
      console.warn('tfgpu_magic: cannot ask the server about the agreement to the saved settings', error);
      return false;
    }
  }

  /** Per notebook path, the settings (`settingsKey`) known agreed. */
  private _agreed = new Map<string, string>();
}

/**
 * The notebook's saved settings, read from its model with these setting words (kind `none` without a model;
 * `waiting` while no words are known).
 */
export function savedOf(panel: NotebookPanel, words: SettingWords | null, trans?: TranslationBundle): SavedRead {
  const model = panel.model;
  return model ? readSaved(model.getMetadata(METADATA_KEY), words, trans) : { kind: 'none' };
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

/**
 * Applies the saved settings of every open notebook at each start of its kernel: the first one when the
 * notebook opens, a change of kernel, a restart (ours, JupyterLab's, or the server's automatic one).
 *
 * The code goes out silently, before anything else: the kernel connection queues what is sent while the
 * kernel (re)starts and sends it in order once the kernel answers, so the apply runs before any cell the
 * user (or "Restart Kernel and Run All Cells") sends afterwards. A notebook without `metadata.tfgpu`, or
 * with `apply_on_start` off, is never sent anything.
 *
 * Only settings the user agreed to for this notebook are sent ("Apply saved settings" in the sidebar), or that
 * the user wrote here (Check & save, Restart kernel and apply); the server keeps that (`ConsentClient`). Any other
 * (a notebook from elsewhere, trusted by JupyterLab or not) waits for the user's answer in the sidebar.
 *
 * While a start's apply waits (a saved `visible auto --wait`), the kernel's progress lines show in the sidebar,
 * never in an output area, and the user can cancel the wait (`cancel`: the kernel is interrupted).
 *
 * The saved settings are read with the server's setting words (the feed's: the same for every notebook): a start
 * before the first answer named them waits for it, as it waits for the server's answer about consent.
 */
export class StartApplier {
  constructor(
    private readonly _tracker: INotebookTracker,
    private readonly _trans: TranslationBundle,
    private readonly _feed: GpuFeed
  ) {
    _tracker.forEach(panel => this._watch(panel));
    _tracker.widgetAdded.connect((_, panel) => this._watch(panel), this);
    _feed.changed.connect(this._onFeed, this);
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
   * Save these settings (read with `words`) with apply_on_start on, after the user confirms the restart, restart
   * the kernel, and let the start apply them. The kernel checks them first where it can (`link`: its comm): the
   * dialog names each value it saves and applies, each it leaves out and why, and marks those that could not be
   * checked (`note`: why none could). Cancel is the dialog's default: Enter does not restart. Resolves false
   * when the user cancels, nothing is left to apply, or no words name the settings (nothing is saved then).
   */
  async restartAndApply(
    panel: NotebookPanel,
    settings: SavedSettings,
    words: SettingWords | null,
    options: { link?: NotebookLink | null; note?: string } = {}
  ): Promise<boolean> {
    const trans = this._trans;
    if (!words) {
      return false;
    }
    const link = options.link && options.link.panel === panel && options.link.canValidate ? options.link : null;
    let answer: Validated | null = null;
    let notChecked =
      options.note ??
      trans.__('tfgpu_magic is not loaded in this kernel, so nothing was checked: the kernel checks them at its start.');
    if (link) {
      try {
        answer = await link.validate(settings);
      } catch (error) {
        const why = error instanceof LinkClosedError ? trans.__('the connection to the kernel is not open') : String(error);
        notChecked = trans.__('The kernel did not answer (%1), so nothing was checked: it checks them at its start.', why);
      }
    }
    const plan = restartPlan(settings, answer, notChecked, trans);
    const applicable = hasSettings(plan.settings);
    const reply = await showDialog({
      title: trans.__('Restart kernel and apply'),
      body: new Widget({ node: restartBody(plan, trans) }),
      buttons: applicable
        ? [
            Dialog.cancelButton({ label: trans.__('Cancel') }),
            Dialog.warnButton({ label: trans.__('Restart and apply'), className: 'tfgpu-danger' })
          ]
        : [Dialog.cancelButton({ label: trans.__('Close') })],
      // As JupyterLab's own "Shut down" asks: the safe answer has the focus, so Enter keeps the kernel.
      defaultButton: 0
    });
    if (!applicable || !reply.button.accept || panel.isDisposed) {
      return false;
    }
    const document = savedDocument(plan.settings, true, words);
    writeSaved(panel, document);
    void this.agree(panel, document); // the user's own settings: known agreed here at once, before the restart
    const record = this._record(panel);
    const kernel = panel.sessionContext.session?.kernel ?? null;
    if (!kernel) {
      record.state = { kind: 'skipped', message: trans.__('this notebook has no kernel: start one, and the settings apply at its start') };
      this._changed.emit(panel);
      return true;
    }
    record.restartRequested = true;
    // The SessionContext's restart (not its dialog: ours asked already) keeps JupyterLab's own view of the
    // kernel right; the 'restarting' status it emits schedules the apply (see _onStatusChanged).
    await panel.sessionContext.restartKernel();
    return true;
  }

  /**
   * Where a notice's "Show in GPUs sidebar" leads: the sidebar's saved settings of that notebook (set by the
   * plugin once the sidebar exists).
   */
  showSaved: ((panel: NotebookPanel) => void) | null = null;

  /**
   * The user's "Apply saved settings": record on the server that they agree to this notebook's saved settings,
   * and send them to the running kernel the way a start does. A kernel that has run cells already answers that
   * they apply at its next start.
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

  /**
   * The user wrote these settings here (Check & save, Restart kernel and apply): they need no question. Resolves
   * true once the server keeps that (false: this page knows it, other pages will ask).
   */
  agree(panel: NotebookPanel, document: SavedDocument): Promise<boolean> {
    return this._consent.agree(panel.context.path, document);
  }

  /**
   * The user's "Cancel" while the start's apply waits: interrupt the kernel. The apply then answers that it was
   * interrupted and changed nothing; the cells waiting behind it run.
   */
  cancel(panel: NotebookPanel): void {
    const record = this._records.get(panel);
    const state = record?.state;
    const kernel = record?.kernel;
    if (!record || state?.kind !== 'applying' || !state.progress || state.cancelling || !record.future || !kernel) {
      return;
    }
    record.cancelled = record.generation;
    this._setState(panel, record, { ...state, cancelling: true });
    kernel.interrupt().catch(error => {
      console.warn('tfgpu_magic: cannot interrupt the kernel', error);
      if (record.state?.kind === 'applying' && record.cancelled === record.generation) {
        record.cancelled = 0;
        this._setState(panel, record, { ...record.state, cancelling: false });
      }
    });
  }

  dispose(): void {
    this._feed.changed.disconnect(this._onFeed, this);
    Signal.clearData(this);
  }

  /** The server named the settings: the sends that waited for that go now. */
  private _onFeed(): void {
    if (this._feed.settingWords === null) {
      return;
    }
    for (const [panel, record] of this._records) {
      const waiting = record.waiting;
      if (waiting) {
        record.waiting = null;
        this._send(panel, record, waiting.consented);
      }
    }
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
      decision: 0,
      cancelled: 0,
      scheduled: false,
      restartRequested: false,
      waiting: null
    });
    const context = panel.sessionContext;
    context.kernelChanged.connect(this._onKernelChanged, this);
    context.statusChanged.connect(this._onStatusChanged, this);
    panel.disposed.connect(() => {
      const notice = this._notices.get(panel);
      if (notice !== undefined) {
        Notification.dismiss(notice);
        this._notices.delete(panel);
      }
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
    const saved = savedOf(panel, this._feed.settingWords, this._trans);
    if (saved.kind === 'waiting') {
      record.waiting = { consented: consented || (record.waiting?.consented ?? false) };
      return; // sent once the server has named the settings (`_onFeed`)
    }
    record.waiting = null;
    const afterRestart = record.restartRequested;
    record.restartRequested = false;
    const decision = ++record.decision; // an answer about consent for an earlier start decides nothing now
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
    if (!hasSettings(saved.saved.settings)) {
      this._setState(panel, record, null); // nothing to apply: nothing sent, nothing asked
      return;
    }
    const path = panel.context.path;
    if (consented) {
      void this._consent.agree(path, saved.saved); // known agreed here at once; the server keeps it
    } else if (!this._consent.known(path, saved.saved)) {
      // Asked of the server (a few milliseconds): sent once it says agreed. Cells the user ran meanwhile come
      // first, and the kernel then says its settings apply at its next start (reason ran_cells).
      void this._consent.agreed(path, saved.saved).then(agreed => {
        const current = panel.sessionContext.session?.kernel ?? null;
        if (record.decision !== decision || !this._records.has(panel) || panel.isDisposed || current !== kernel) {
          return; // a newer start (or the user's button) decides for this notebook now
        }
        if (agreed) {
          this._execute(panel, record, kernel, saved.saved, afterRestart, false);
        } else {
          this._setState(panel, record, { kind: 'consent', settings: saved.saved.settings });
        }
      });
      return;
    }
    this._execute(panel, record, kernel, saved.saved, afterRestart, consented);
  }

  /** Send the apply of these saved settings to the kernel, silently, and follow it to its answer. */
  private _execute(
    panel: NotebookPanel,
    record: IRecord,
    kernel: Kernel.IKernelConnection,
    saved: SavedDocument,
    afterRestart: boolean,
    consented: boolean
  ): void {
    if (kernel.isDisposed || kernel.status === 'dead') {
      return;
    }
    let future: Kernel.IShellFuture<KernelMessage.IExecuteRequestMsg, KernelMessage.IExecuteReplyMsg>;
    try {
      future = kernel.requestExecute(
        {
          code: applyCode(saved),
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
    const settings = saved.settings;
    this._setState(panel, record, { kind: 'applying', afterRestart, settings, consented });
    // What the apply prints goes to no output area: its progress lines (a saved `--wait`) show in the sidebar.
    future.onIOPub = msg => {
      if (msg.header.msg_type !== 'stream' || record.generation !== generation) {
        return;
      }
      const content = msg.content as KernelMessage.IStreamMsg['content'];
      const progress = content.name === 'stdout' ? waitProgress(content.text) : null;
      const state = record.state;
      if (progress && state?.kind === 'applying' && progress !== state.progress) {
        this._setState(panel, record, { ...state, progress });
      }
    };
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
        const cancelled = record.cancelled === generation;
        record.cancelled = 0;
        this._setState(panel, record, {
          kind: 'done',
          reply,
          afterRestart,
          kernelName,
          settings,
          consented,
          cancelled
        });
      })
      .catch(error => console.error('tfgpu_magic: reading the apply reply failed', error));
  }

  private _setState(panel: NotebookPanel, record: IRecord, state: ApplyState | null): void {
    record.state = state;
    this._notify(panel, state);
    this._changed.emit(panel);
  }

  /**
   * A refusal at kernel start reaches the user wherever they look, not only in the sidebar: a JupyterLab
   * notification with the reason and a way to the saved settings. A newer state of that notebook takes it back.
   */
  private _notify(panel: NotebookPanel, state: ApplyState | null): void {
    const before = this._notices.get(panel);
    if (before !== undefined) {
      Notification.dismiss(before);
      this._notices.delete(panel);
    }
    const notice = startRefusalNotice(state, panel.context.localPath || panel.title.label, this._trans);
    if (!notice) {
      return;
    }
    const actions: Notification.IAction[] = this.showSaved
      ? [
          {
            label: this._trans.__('Show in GPUs sidebar'),
            caption: this._trans.__("Open the GPUs sidebar at this notebook's saved settings"),
            displayType: 'accent',
            callback: () => this.showSaved?.(panel)
          }
        ]
      : [];
    const options = { autoClose: false as const, actions };
    const id =
      notice.level === 'error'
        ? Notification.error(notice.text, options)
        : Notification.warning(notice.text, options);
    this._notices.set(panel, id);
  }

  private _record(panel: NotebookPanel): IRecord {
    this._watch(panel);
    return this._records.get(panel)!;
  }

  private _records = new Map<NotebookPanel, IRecord>();
  /** The notification of each notebook's refusal at kernel start, while it shows. */
  private _notices = new Map<NotebookPanel, string>();
  private _changed = new Signal<this, NotebookPanel>(this);
  private _consent = new ConsentClient();
}

/**
 * The dialog's text: what is saved and applied, one value a line (a mark on those not checked), what is left out
 * and why, and a note said once when nothing could be checked.
 */
function restartBody(plan: RestartPlan, trans: TranslationBundle): HTMLElement {
  const body = el('div', 'tfgpu-restart-dialog');
  if (plan.kept.length) {
    body.appendChild(
      el(
        'p',
        'tfgpu-restart-intro',
        trans.__("The kernel restarts (its variables are lost); these settings are saved in the notebook and applied before any cell:")
      )
    );
    const list = el('ul', 'tfgpu-restart-list tfgpu-restart-kept');
    list.setAttribute('aria-label', trans.__('Saved and applied'));
    for (const line of plan.kept) {
      const item = el('li', 'tfgpu-restart-item');
      item.dataset.setting = line.setting;
      item.appendChild(el('code', 'tfgpu-restart-value', line.text));
      if (line.reason) {
        item.classList.add('tfgpu-restart-unchecked');
        // The kernel's words say it ("GPU 9 not checked: ..."); the mark is the colour and the class.
        item.appendChild(el('span', 'tfgpu-restart-reason', line.reason));
      }
      list.appendChild(item);
    }
    body.appendChild(list);
  } else {
    body.appendChild(el('p', 'tfgpu-restart-intro', trans.__('Nothing to apply: the kernel refused every setting, so nothing is saved and the kernel keeps running.')));
  }
  if (plan.leftOut.length) {
    body.appendChild(el('p', 'tfgpu-restart-left-title', trans.__('Left out (the kernel refused them; not saved):')));
    const list = el('ul', 'tfgpu-restart-list tfgpu-restart-left');
    list.setAttribute('aria-label', trans.__('Left out'));
    for (const line of plan.leftOut) {
      const item = el('li', 'tfgpu-restart-item');
      item.dataset.setting = line.setting;
      item.appendChild(el('code', 'tfgpu-restart-value', line.text));
      item.appendChild(el('span', 'tfgpu-restart-reason', line.reason));
      list.appendChild(item);
    }
    body.appendChild(list);
  }
  if (plan.note) {
    body.appendChild(el('p', 'tfgpu-restart-note', plan.note));
  }
  return body;
}
