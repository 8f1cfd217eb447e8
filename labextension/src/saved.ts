/**
 * The "Saved settings" section of the sidebar, for the notebook in front: what its metadata carries, whether
 * it applies at each kernel start, how the last start went, and an editor that checks values against the
 * kernel before it saves them. The inputs are built once and keep what the user types across re-renders.
 *
 * The section shows one verdict: the latest of the events that have one (an apply at kernel start, a
 * restart-and-apply, a check, a save). A newer one replaces the older; the field errors under the inputs
 * belong to the latest check.
 *
 * The editor has one input per setting the data names (`SettingWords`: the server's answer, else the kernel's
 * comm state); until they are named it waits, disabled, and says so.
 */
import type { NotebookPanel } from '@jupyterlab/notebook';
import type { TranslationBundle } from '@jupyterlab/translation';

import { savedOf, StartApplier, writeSaved } from './apply';
import { LinkClosedError, NotebookLink } from './comm';
import { METADATA_KEY } from './constants';
import {
  applyStatusView,
  consentView,
  editorText,
  firstCellSource,
  hasSettings,
  isFirstCellSource,
  Level,
  savedChangedSince,
  SavedRead,
  SavedSettings,
  savedDocument,
  savedRows,
  sameSettingWords,
  SettingWords,
  settingsFromEditor,
  settingsKey,
  Words
} from './model';
import { el, keepFocus, line } from './render';

/** A button styled as JupyterLab's, with its accessible name equal to its text. */
function button(text: string, className: string, title: string): HTMLButtonElement {
  const node = el('button', `jp-Button jp-mod-styled ${className}`, text, title);
  node.type = 'button';
  return node;
}

/** What the editor last said (a check, a save), and when: `at` orders it against the apply states. */
interface IEditorMessage {
  text: string;
  level: Level | 'muted';
  at: number;
}

/** Insert the saved settings as the notebook's first cell, or rewrite the top cell if it is one written before. */
function writeFirstCell(panel: NotebookPanel, source: string): void {
  const model = panel.model;
  if (!model) {
    return;
  }
  const shared = model.sharedModel;
  const first = shared.cells[0];
  if (first && first.cell_type === 'code' && isFirstCellSource(first.getSource())) {
    first.setSource(source);
  } else {
    shared.insertCell(0, { cell_type: 'code', source, metadata: {} });
  }
  panel.content.activeCellIndex = 0;
}

/** What "Write as first cell" did: written, or why not (one line). */
export interface IFirstCellVerdict {
  ok: boolean;
  text: string;
}

/**
 * "Write as first cell": the notebook's saved settings as `%load_ext tfgpu_magic` and one `%tfgpu` line per value,
 * written only once the kernel's own check (the comm's `validate`, as Check & save asks it) accepted every value.
 * The metadata may come from anywhere; the cell is code that papermill and nbconvert run unseen. Without a kernel
 * that can check (none, or tfgpu_magic not loaded), nothing is written.
 */
export async function writeCheckedFirstCell(
  panel: NotebookPanel,
  link: NotebookLink | null,
  words: SettingWords | null,
  trans: TranslationBundle
): Promise<IFirstCellVerdict> {
  const saved = savedOf(panel, words, trans);
  if (saved.kind === 'none' || (saved.kind === 'ok' && !hasSettings(saved.saved.settings))) {
    return { ok: false, text: trans.__('Nothing written: this notebook has no saved settings.') };
  }
  if (saved.kind !== 'ok') {
    return { ok: false, text: trans.__('Nothing written: %1', saved.message) };
  }
  if (!link || link.panel !== panel || !link.canValidate) {
    return {
      ok: false,
      text: trans.__('Nothing written: start the kernel and load tfgpu_magic so it can check the values first.')
    };
  }
  let answer;
  try {
    answer = await link.validate(saved.saved.settings);
  } catch (error) {
    const why = error instanceof LinkClosedError ? trans.__('the connection to the kernel is not open') : String(error);
    return { ok: false, text: trans.__('Nothing written: the kernel did not answer (%1).', why) };
  }
  if (!answer.ok) {
    const reasons = Object.values(answer.errors).join('; ') || trans.__('no reason given');
    return { ok: false, text: trans.__('Nothing written: the kernel refused the saved settings: %1', reasons) };
  }
  // What the kernel checked is what is written: settings changed meanwhile are checked again first.
  const now = savedOf(panel, words, trans);
  if (panel.isDisposed || now.kind !== 'ok' || settingsKey(now.saved) !== settingsKey(saved.saved) || !words) {
    return { ok: false, text: trans.__('Nothing written: the saved settings changed while the kernel checked them.') };
  }
  writeFirstCell(panel, firstCellSource(saved.saved, words));
  return { ok: true, text: trans.__('The first cell now sets the saved settings up (checked by the kernel).') };
}

export class SavedSection {
  constructor(
    private readonly _trans: TranslationBundle,
    private readonly _applier: StartApplier | null
  ) {
    const trans = _trans;
    this.node = el('section', 'tfgpu-section tfgpu-saved');
    this.node.setAttribute('aria-label', trans.__('Saved settings'));
    this.node.appendChild(el('h2', 'tfgpu-section-title', trans.__('Saved settings')));
    const body = el('div', 'tfgpu-body');
    this.node.appendChild(body);

    // The one verdict: how the latest apply, check or save went.
    this._applyStatus = el('div', 'tfgpu-apply-box tfgpu-verdict');
    this._applyStatus.setAttribute('aria-live', 'polite');
    this._summary = el('div', 'tfgpu-saved-summary');
    body.appendChild(this._applyStatus);
    body.appendChild(this._summary);

    const applyLabel = el('label', 'tfgpu-apply-on-start');
    this._applyOnStart = el('input');
    this._applyOnStart.type = 'checkbox';
    this._applyOnStart.addEventListener('change', () => this._setApplyOnStart(this._applyOnStart.checked));
    applyLabel.appendChild(this._applyOnStart);
    applyLabel.appendChild(document.createTextNode(` ${trans.__('Apply on kernel start')}`));
    applyLabel.title = trans.__('Apply the saved settings silently at every start of this notebook’s kernel, before any cell');
    body.appendChild(applyLabel);

    const editor = el('form', 'tfgpu-editor');
    editor.setAttribute('aria-label', trans.__('Edit saved settings'));
    editor.addEventListener('submit', event => {
      event.preventDefault();
      void this._checkAndSave();
    });
    this._fields = el('div', 'tfgpu-fields');
    editor.appendChild(this._fields);
    this._id = SavedSection._count;
    SavedSection._count += 1;
    this._editorNote = el('div', 'tfgpu-line tfgpu-muted tfgpu-editor-note');
    editor.appendChild(this._editorNote);

    const buttons = el('div', 'tfgpu-buttons');
    this._checkSave = button(
      trans.__('Check & save'),
      'jp-mod-accept tfgpu-check-save',
      trans.__("Check the values with this kernel's tfgpu_magic, then save them in the notebook's metadata")
    );
    this._checkSave.type = 'submit';
    this._restart = button(
      trans.__('Restart kernel and apply'),
      'tfgpu-danger tfgpu-restart-apply',
      trans.__('Save these settings, restart the kernel and apply them before any cell')
    );
    this._restart.addEventListener('click', () => void this._restartAndApply());
    this._firstCell = button(
      trans.__('Write as first cell'),
      'tfgpu-write-cell',
      trans.__(
        'Insert the saved settings as %load_ext and %tfgpu lines in a first cell, for running the notebook elsewhere (nbconvert, papermill); the kernel checks them first'
      )
    );
    this._firstCell.addEventListener('click', () => void this.writeFirstCell());
    buttons.appendChild(this._checkSave);
    buttons.appendChild(this._restart);
    buttons.appendChild(this._firstCell);
    editor.appendChild(buttons);
    body.appendChild(editor);

    this.update(null, null);
  }

  readonly node: HTMLElement;

  /**
   * Follow the notebook in front (and its kernel link), and show what it saved. `words`: the kernel's words for
   * the settings' states (the link's, from its last state message); `settingWords`: the settings there are.
   */
  update(
    panel: NotebookPanel | null,
    link: NotebookLink | null,
    words: Words | null = null,
    settingWords: SettingWords | null = null
  ): void {
    this._words = words;
    if (!sameSettingWords(settingWords, this._settingWords)) {
      this._settingWords = settingWords;
      this._buildFields();
      if (panel === this._panel && !this._dirty) {
        this._fill(); // what the notebook saved can be read now
      }
    }
    if (panel !== this._panel) {
      this._panel?.model?.metadataChanged.disconnect(this._onMetadata, this);
      this._panel = panel;
      panel?.model?.metadataChanged.connect(this._onMetadata, this);
      this._dirty = false;
      this._checkedKernel = null;
      this._message(null);
      this._fill();
    }
    this._link = link;
    this._forgetStale();
    this._render();
  }

  /**
   * A check's verdict speaks of the kernel that gave it: once that kernel is gone (a restart, another kernel),
   * the verdict and the errors under the fields go with it rather than stand as if they were about this one.
   */
  private _forgetStale(): void {
    const link = this._link && this._link.panel === this._panel ? this._link : null;
    const pid = link?.sections?.kernel?.pid;
    // Restarting or dead: whatever comes next, the kernel that gave the verdict is gone.
    const gone = link?.status === 'restarting' || link?.status === 'dead';
    const kernel = link && !gone && typeof pid === 'number' ? `${link.kernelId} ${pid}` : null;
    if ((kernel === null && !gone) || kernel === this._checkedKernel) {
      return;
    }
    const before = this._checkedKernel;
    this._checkedKernel = kernel;
    if (before !== null && !this._busy) {
      for (const name of this._errors.keys()) {
        this._fieldError(name, '');
      }
      this._editorMessage = null;
    }
  }

  dispose(): void {
    this._panel?.model?.metadataChanged.disconnect(this._onMetadata, this);
    this._panel = null;
    this._link = null;
  }

  private _onMetadata(_: unknown, change: { key: string }): void {
    if (change.key !== METADATA_KEY) {
      return;
    }
    if (!this._dirty) {
      this._fill();
    }
    this._render();
  }

  private _saved(): SavedRead {
    return this._panel ? savedOf(this._panel, this._settingWords, this._trans) : { kind: 'none' };
  }

  /**
   * One input per setting the words name, in their order; what was typed stays in the inputs of the settings
   * that remain.
   */
  private _buildFields(): void {
    const trans = this._trans;
    const typed = new Map([...this._inputs].map(([name, input]) => [name, input.value]));
    this._inputs.clear();
    this._errors.clear();
    const fields: HTMLElement[] = [];
    for (const { name, perGpu, placeholder } of this._settingWords ?? []) {
      const field = el('div', 'tfgpu-field');
      field.dataset.setting = name;
      const id = `tfgpu-saved-${name}-${this._id}`;
      const label = el('label', 'tfgpu-field-label', name);
      label.htmlFor = id;
      const input = el('input', 'jp-mod-styled tfgpu-input');
      input.id = id;
      input.type = 'text';
      input.spellcheck = false;
      input.autocomplete = 'off';
      input.dataset.setting = name;
      input.placeholder = placeholder;
      input.title = perGpu
        ? trans.__('The text after %%tfgpu %1; one per GPU separated by ";", e.g. "2GB --gpu 0; 4GB --gpu 1"', name)
        : trans.__('The text after %%tfgpu %1', name);
      input.value = typed.get(name) ?? '';
      input.addEventListener('input', () => {
        this._dirty = true;
        this._fieldError(name, '');
      });
      const error = el('div', 'tfgpu-field-error');
      error.id = `${id}-error`;
      error.setAttribute('aria-live', 'polite');
      input.setAttribute('aria-describedby', error.id);
      field.appendChild(label);
      field.appendChild(input);
      field.appendChild(error);
      fields.push(field);
      this._inputs.set(name, input);
      this._errors.set(name, error);
      this._fieldError(name, '');
    }
    keepFocus(this._fields, () => this._fields.replaceChildren(...fields));
  }

  /** Put the saved values in the inputs. */
  private _fill(): void {
    const saved = this._saved();
    const settings: SavedSettings = saved.kind === 'ok' ? saved.saved.settings : {};
    for (const [name, input] of this._inputs) {
      input.value = editorText(settings[name]);
      this._fieldError(name, '');
    }
  }

  private _editorSettings(): SavedSettings {
    const texts: { [name: string]: string } = {};
    for (const [name, input] of this._inputs) {
      texts[name] = input.value;
    }
    return this._settingWords ? settingsFromEditor(texts, this._settingWords) : {};
  }

  private _render(): void {
    const trans = this._trans;
    const panel = this._panel;
    const saved = this._saved();
    this.node.hidden = panel === null;

    // The one verdict: the editor's last message if it is newer than the last apply state, else that state.
    const state = panel && this._applier ? this._applier.state(panel) : null;
    if (state !== this._lastState) {
      this._lastState = state;
      this._stateAt = ++this._events;
    }
    const editorMessage = this._editorMessage && this._editorMessage.at > this._stateAt ? this._editorMessage : null;
    // The kernel's own record now: what waited for `import tensorflow` reads as it went, not as it was sent.
    const kernel = this._link && this._link.panel === panel ? this._link.sections?.kernel ?? null : null;
    const status = editorMessage ? null : applyStatusView(state, trans, this._words, kernel);
    const statusNodes: HTMLElement[] = [];
    if (editorMessage) {
      const node = line(editorMessage.text, editorMessage.level, 'tfgpu-editor-message');
      node.setAttribute('role', 'status');
      statusNodes.push(node);
    } else if (state?.kind === 'consent') {
      // Settings removed since the question leave nothing to agree to.
      if (panel && saved.kind === 'ok' && hasSettings(saved.saved.settings)) {
        statusNodes.push(this._consentBox(panel, saved.saved.settings));
      }
    } else if (status) {
      const node = line(status.text, status.level, 'tfgpu-apply-status');
      node.setAttribute('role', 'status');
      statusNodes.push(node);
      if (status.progress) {
        // The kernel's own line while it waits (its words, as it printed them), and the way out.
        const progress = line(status.progress, 'muted', 'tfgpu-apply-progress');
        progress.title = status.progress;
        statusNodes.push(progress);
      }
      if (status.cancel) {
        const cancel = button(
          status.cancelling ? trans.__('Cancelling…') : trans.__('Cancel'),
          'tfgpu-cancel-apply',
          trans.__('Stop waiting: interrupt the kernel. Nothing is applied, and the cells waiting behind it run.')
        );
        cancel.disabled = status.cancelling === true || !panel || !this._applier;
        cancel.addEventListener('click', () => {
          cancel.disabled = true;
          if (panel) {
            this._applier?.cancel(panel);
          }
        });
        statusNodes.push(cancel);
      }
      if (status.retry) {
        const retry = this._restartSavedButton(
          trans.__('Try again'),
          'tfgpu-retry',
          trans.__('Restart the kernel and apply the saved settings again')
        );
        retry.disabled = saved.kind !== 'ok' || !this._applier;
        statusNodes.push(retry);
      }
      if (status.restart) {
        // Not applied because the kernel had run cells: the restart is how to have them.
        const restart = this._restartSavedButton(
          trans.__('Restart kernel and apply'),
          'tfgpu-restart-now',
          trans.__("Restart the kernel and apply the saved settings before any cell (the kernel's variables are lost)")
        );
        restart.disabled = saved.kind !== 'ok' || !this._applier || this._busy;
        statusNodes.push(restart);
      }
      if (savedChangedSince(state, saved.kind === 'ok' ? saved.saved.settings : null)) {
        statusNodes.push(
          line(
            trans.__('The saved settings changed since this kernel started: they apply at its next start.'),
            'muted',
            'tfgpu-apply-changed'
          )
        );
      }
    }
    keepFocus(this._applyStatus, () => this._applyStatus.replaceChildren(...statusNodes));

    // What the metadata carries.
    const summary: HTMLElement[] = [];
    if (saved.kind === 'none') {
      summary.push(line(trans.__('none saved'), 'muted', 'tfgpu-saved-none'));
    } else if (saved.kind === 'waiting') {
      summary.push(line(trans.__('Waiting for the server to name the settings…'), 'muted', 'tfgpu-saved-waiting'));
    } else if (saved.kind === 'newer' || saved.kind === 'invalid') {
      summary.push(line(trans.__('The saved settings cannot be used: %1', saved.message), 'error', 'tfgpu-saved-problem'));
    } else if (!hasSettings(saved.saved.settings)) {
      summary.push(line(trans.__('none saved'), 'muted', 'tfgpu-saved-none'));
    } else {
      const list = el('ul', 'tfgpu-list tfgpu-saved-list');
      list.setAttribute('aria-label', trans.__('Saved settings'));
      for (const row of savedRows(saved.saved.settings)) {
        const item = el('li', 'tfgpu-item tfgpu-saved-item');
        item.dataset.setting = row.name;
        item.appendChild(el('span', 'tfgpu-item-label', row.name));
        item.appendChild(el('span', 'tfgpu-item-figure tfgpu-saved-value', row.value, row.value));
        list.appendChild(item);
      }
      summary.push(list);
    }
    this._summary.replaceChildren(...summary);

    const usable = saved.kind === 'ok' && hasSettings(saved.saved.settings);
    this._applyOnStart.checked = saved.kind === 'ok' && saved.saved.apply_on_start;
    this._applyOnStart.disabled = !usable || !panel;

    // The editor: it needs the settings named, and checking needs the kernel's comm.
    const named = this._settingWords !== null;
    const canValidate = !!this._link && this._link.canValidate && this._link.panel === panel;
    const busy = this._busy;
    this._editorNote.textContent = !named
      ? trans.__('Waiting for the server to name the settings…')
      : canValidate
        ? ''
        : trans.__('Load tfgpu_magic (button above) to check settings against this kernel');
    this._editorNote.hidden = named && canValidate;
    const newer = saved.kind === 'newer';
    this._checkSave.disabled = !panel || !named || !canValidate || busy || newer;
    this._restart.disabled = !panel || !named || busy || newer || !this._applier;
    this._firstCell.disabled = !panel || !usable || busy;
    for (const input of this._inputs.values()) {
      input.disabled = !panel || busy;
    }
  }

  /** A button (the destructive red) that restarts the kernel and applies what the notebook has saved then. */
  private _restartSavedButton(text: string, className: string, title: string): HTMLButtonElement {
    const node = button(text, `tfgpu-danger ${className}`, title);
    node.addEventListener('click', () => {
      const current = this._saved();
      if (this._panel && this._applier && current.kind === 'ok') {
        void this._applier.restartAndApply(this._panel, current.saved.settings, this._settingWords, { link: this._link });
      }
    });
    return node;
  }

  /**
   * Settings the user has not agreed to, waiting for the user: what was not applied (the settings saved now:
   * the button applies those), the button, and what the button does.
   */
  private _consentBox(panel: NotebookPanel, settings: SavedSettings): HTMLElement {
    const trans = this._trans;
    const view = consentView(settings, trans);
    const box = el('div', 'tfgpu-consent');
    box.setAttribute('role', 'status');
    box.appendChild(line(view.text, 'info', 'tfgpu-apply-status tfgpu-consent-text'));
    const apply = button(view.button, 'jp-mod-accept tfgpu-consent-apply', view.title);
    apply.disabled = !this._applier;
    apply.addEventListener('click', () => {
      apply.disabled = true; // one apply per click; the state that follows re-renders the section
      this._applier?.applyWithConsent(panel);
    });
    box.appendChild(apply);
    box.appendChild(line(view.note, 'muted', 'tfgpu-note tfgpu-consent-note'));
    return box;
  }

  private _fieldError(name: string, message: string): void {
    const node = this._errors.get(name);
    const input = this._inputs.get(name);
    if (node) {
      node.textContent = message;
      node.hidden = !message;
    }
    if (input) {
      input.classList.toggle('tfgpu-invalid', !!message);
      input.setAttribute('aria-invalid', message ? 'true' : 'false');
    }
  }

  /**
   * The editor's verdict (a check, a save): newer than any apply state so far, so it is the one shown until
   * the next apply state or message. Null: none (the last apply state shows again).
   */
  private _message(text: string | null, level: Level | 'muted' = 'muted'): void {
    this._editorMessage = text ? { text, level, at: ++this._events } : null;
    this._render();
    if (text && this.node.isConnected) {
      this._applyStatus.scrollIntoView?.({ block: 'nearest' });
    }
  }

  /**
   * Ask the kernel to check the editor's settings. True when it accepts them (or there is nothing to check);
   * otherwise its messages are under their fields and the result is false.
   */
  private async _check(settings: SavedSettings, required: boolean, restart = false): Promise<boolean> {
    const trans = this._trans;
    for (const name of this._errors.keys()) {
      this._fieldError(name, '');
    }
    const link = this._link;
    if (!hasSettings(settings)) {
      return true;
    }
    if (!link || !link.canValidate) {
      if (required) {
        this._message(trans.__('Load tfgpu_magic (button above) to check settings against this kernel'), 'warn');
      }
      return !required;
    }
    this._message(trans.__('Checking with the kernel… (a busy kernel answers when its cell ends)'), 'info');
    let answer;
    try {
      answer = await link.validate(settings);
    } catch (error) {
      const why = error instanceof LinkClosedError ? trans.__('the connection to the kernel is not open') : String(error);
      this._message(
        restart
          ? trans.__('The kernel did not answer (%1): no restart, nothing saved.', why)
          : trans.__('The kernel did not answer (%1); nothing saved.', why),
        'error'
      );
      return false;
    }
    if (answer.ok) {
      return true;
    }
    const general: string[] = [];
    for (const [name, message] of Object.entries(answer.errors)) {
      if (this._errors.has(name)) {
        this._fieldError(name, message);
      } else {
        general.push(message);
      }
    }
    this._message(
      general.length
        ? restart
          ? trans.__('Not restarted: %1', general.join('\n'))
          : general.join('\n')
        : restart
          ? trans.__('The kernel refused these settings (see under the fields): no restart, nothing saved.')
          : trans.__('The kernel refused these settings; nothing saved.'),
      'error'
    );
    return false;
  }

  private async _checkAndSave(): Promise<void> {
    const panel = this._panel;
    if (!panel || this._busy) {
      return;
    }
    const trans = this._trans;
    const settings = this._editorSettings();
    this._setBusy(true);
    try {
      if (!(await this._check(settings, true)) || panel !== this._panel) {
        return;
      }
      if (!hasSettings(settings)) {
        writeSaved(panel, null);
        this._dirty = false;
        this._fill();
        this._message(trans.__('Saved settings removed from the notebook.'), 'ok');
        return;
      }
      const current = this._saved();
      const applyOnStart = current.kind === 'ok' && hasSettings(current.saved.settings) ? current.saved.apply_on_start : true;
      const words = this._settingWords;
      if (!words) {
        return; // the editor is disabled until the settings are named
      }
      const document = savedDocument(settings, applyOnStart, words);
      writeSaved(panel, document);
      this._dirty = false;
      this._fill();
      // The user's own settings: no question at the next start, in this page and (once the server keeps it) any.
      const kept = this._applier ? await this._applier.agree(panel, document) : true;
      const saved = applyOnStart
        ? trans.__('Saved in the notebook. They apply at each kernel start (Restart kernel and apply: now).')
        : trans.__('Saved in the notebook (not applied at kernel start: the box above is off).');
      this._message(
        kept
          ? saved
          : trans.__('%1 The server did not record that you wrote them: other JupyterLab pages ask before applying them.', saved),
        kept ? 'ok' : 'warn'
      );
    } finally {
      this._setBusy(false);
    }
  }

  private async _restartAndApply(): Promise<void> {
    const panel = this._panel;
    if (!panel || this._busy || !this._applier) {
      return;
    }
    const settings = this._editorSettings();
    if (!hasSettings(settings)) {
      this._message(this._trans.__('Nothing to apply: fill in at least one setting.'), 'warn');
      return;
    }
    this._setBusy(true);
    let restarted = false;
    try {
      // Checked first where the kernel can: a bad value then costs no restart (and the reason is the verdict).
      const checkable = !!this._link && this._link.canValidate && this._link.panel === panel;
      if (!(await this._check(settings, false, true)) || panel !== this._panel) {
        return;
      }
      let note: string | undefined;
      if (checkable) {
        this._message(null);
      } else {
        // Without the extension loaded the kernel cannot check them now: it checks them as it applies them.
        note = this._trans.__(
          'These values were not checked (tfgpu_magic is not loaded in this kernel): the kernel checks them when it applies them at its start.'
        );
        this._message(note, 'warn');
      }
      restarted = await this._applier.restartAndApply(panel, settings, this._settingWords, {
        link: checkable ? this._link : null,
        note
      });
    } finally {
      this._setBusy(false);
    }
    if (restarted && panel === this._panel) {
      this._dirty = false;
      this._fill();
      this._render();
    }
  }

  /**
   * "Write as first cell" for the notebook in front: the kernel checks the saved values first (see
   * `writeCheckedFirstCell`); the verdict shows here and is returned (the command says it where this is hidden).
   */
  async writeFirstCell(): Promise<IFirstCellVerdict> {
    const panel = this._panel;
    const trans = this._trans;
    if (!panel) {
      return { ok: false, text: trans.__('Nothing written: no notebook is open.') };
    }
    if (this._busy) {
      return { ok: false, text: trans.__('Nothing written: the sidebar is busy with the kernel; try again.') };
    }
    this._setBusy(true);
    let verdict: IFirstCellVerdict;
    try {
      if (this._link?.canValidate && this._link.panel === panel) {
        this._message(trans.__('Checking with the kernel… (a busy kernel answers when its cell ends)'), 'info');
      }
      verdict = await writeCheckedFirstCell(panel, this._link, this._settingWords, trans);
    } finally {
      this._setBusy(false);
    }
    if (panel === this._panel) {
      this._message(verdict.text, verdict.ok ? 'ok' : 'error');
    }
    return verdict;
  }

  private _setApplyOnStart(on: boolean): void {
    const panel = this._panel;
    const saved = this._saved();
    if (!panel || saved.kind !== 'ok') {
      return;
    }
    writeSaved(panel, { ...saved.saved, apply_on_start: on });
  }

  private _setBusy(busy: boolean): void {
    this._busy = busy;
    this._render();
  }

  private static _count = 0;
  /** This section's number, for its inputs' ids. */
  private _id: number;
  private _panel: NotebookPanel | null = null;
  private _link: NotebookLink | null = null;
  private _dirty = false;
  private _busy = false;
  private _applyStatus: HTMLDivElement;
  private _summary: HTMLDivElement;
  private _applyOnStart: HTMLInputElement;
  private _fields: HTMLDivElement;
  private _inputs = new Map<string, HTMLInputElement>();
  private _errors = new Map<string, HTMLDivElement>();
  private _editorNote: HTMLDivElement;
  private _words: Words | null = null;
  private _settingWords: SettingWords | null = null;
  /** Counts the verdicts' events (apply states, editor messages): the highest is the one shown. */
  private _events = 0;
  private _lastState: unknown = undefined;
  private _stateAt = 0;
  private _editorMessage: IEditorMessage | null = null;
  /** The kernel (its id and process) the editor's verdict came from; null before one was known. */
  private _checkedKernel: string | null = null;
  private _checkSave: HTMLButtonElement;
  private _restart: HTMLButtonElement;
  private _firstCell: HTMLButtonElement;
}
