/**
 * The status-bar item: for the front notebook, the GPU memory its kernel holds and the GPU it is on, from the
 * server's answer in the feed the sidebar reads too (model/statusbar.ts; it never reads the sidebar); a click
 * opens the sidebar. Hidden where the kernel holds no GPU memory, and turned off by the `statusBar` setting.
 */
import type { INotebookTracker } from '@jupyterlab/notebook';
import type { TranslationBundle } from '@jupyterlab/translation';
import { Signal } from '@lumino/signaling';
import { Widget } from '@lumino/widgets';

import type { GpuFeed } from './feed';
import { statusBarView, StatusBarView } from './model';

/** The item's name among the feed's readers. */
const READER = 'statusbar';

export class GpuStatusItem extends Widget {
  constructor(
    private readonly _feed: GpuFeed,
    private readonly _tracker: INotebookTracker | null,
    private readonly _trans: TranslationBundle,
    private readonly _open: () => void
  ) {
    // A real button: focusable, Enter and Space open the sidebar as a click does.
    super({ node: Object.assign(document.createElement('button'), { type: 'button' }) });
    this.addClass('tfgpu-status-item');
    this.node.addEventListener('click', () => this._open());
    _feed.changed.connect(this._update, this);
    _tracker?.currentChanged.connect(this._update, this);
    this._update();
  }

  /** Whether the `statusBar` setting is on: the item then needs the feed's answers, the sidebar shown or not. */
  set enabled(value: boolean) {
    this._enabled = value;
    this._feed.need(READER, value);
    const before = this.shown;
    this._update();
    if (this.shown !== before) {
      this.shownChanged.emit();
    }
  }

  get enabled(): boolean {
    return this._enabled;
  }

  /** Shown: on, and the front notebook's kernel holds GPU memory (what the status bar's isActive asks). */
  get shown(): boolean {
    return this._enabled && this._view !== null;
  }

  /** Tells the status bar that `shown` changed (its `activeStateChanged`). */
  readonly shownChanged = new Signal<this, void>(this);

  dispose(): void {
    this._feed.changed.disconnect(this._update, this);
    this._feed.need(READER, false);
    this._tracker?.currentChanged.disconnect(this._update, this);
    super.dispose();
  }

  private _update(): void {
    const kernelId = this._tracker?.currentWidget?.sessionContext.session?.kernel?.id ?? null;
    // While the server does not answer the item hides rather than show old figures.
    const view = this._enabled ? statusBarView(this._feed.current, kernelId, this._trans) : null;
    const changed = (view === null) !== (this._view === null);
    this._view = view;
    this.node.textContent = view ? view.text : '';
    this.node.title = view ? view.title : '';
    this.node.setAttribute('aria-label', view ? view.title : this._trans.__('GPU memory of this notebook'));
    if (changed) {
      this.shownChanged.emit();
    }
  }

  private _enabled = true;
  private _view: StatusBarView | null = null;
}
