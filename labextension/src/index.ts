import { ILayoutRestorer, JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ICommandPalette, Notification } from '@jupyterlab/apputils';
import { INotebookTracker, NotebookActions } from '@jupyterlab/notebook';
import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { IStatusBar } from '@jupyterlab/statusbar';
import { ITranslator, nullTranslator } from '@jupyterlab/translation';

import { savedOf, StartApplier } from './apply';
import {
  API_GPUS,
  API_KEEP,
  CommandIDs,
  PLUGIN_ID,
  SIDEBAR_RANK,
  STATUS_ITEM_ID,
  STATUS_ITEM_RANK,
  TRANSLATION_DOMAIN
} from './constants';
import { CullerNotices } from './culler';
import { GpuFeed } from './feed';
import { gpuIcon } from './icon';
import { hasSettings } from './model';
import { oomRendererFactory } from './oomcard';
import { browserStorage } from './render';
import { requestAPI, setLanguage } from './request';
import { watchSavedPanels } from './savedpanel';
import { GpuStatusItem } from './statusbar';
import { GpuSidebar } from './widget';

/**
 * The GPUs sidebar. It needs only the application: the notebook tracker, the settings, the translator, the
 * layout restorer, the command palette and the status bar are used where the host has them, so the same plugin
 * loads in JupyterLab and in Notebook 7.
 */
const plugin: JupyterFrontEndPlugin<void> = {
  id: PLUGIN_ID,
  description: "A sidebar with the server's GPUs, the notebooks using them, and the front notebook's TensorFlow setup.",
  autoStart: true,
  optional: [
    INotebookTracker,
    ISettingRegistry,
    ITranslator,
    ILayoutRestorer,
    ICommandPalette,
    IStatusBar,
    IRenderMimeRegistry
  ],
  activate: (
    app: JupyterFrontEnd,
    tracker: INotebookTracker | null,
    settingRegistry: ISettingRegistry | null,
    translator: ITranslator | null,
    restorer: ILayoutRestorer | null,
    palette: ICommandPalette | null,
    statusBar: IStatusBar | null,
    rendermime: IRenderMimeRegistry | null
  ): void => {
    const trans = (translator ?? nullTranslator).load(TRANSLATION_DOMAIN);
    setLanguage(translator?.languageCode); // the server's words and the kernels' messages in JupyterLab's language
    if (tracker) {
      watchSavedPanels(tracker); // a saved live panel says what it was where its widget cannot be drawn
    }
    // The server's answer, polled once for the page: the sidebar and the status-bar item read it, each saying
    // when it needs it; the start's apply reads the settings' names from it.
    const feed = new GpuFeed({ request: query => requestAPI<unknown>(API_GPUS, {}, undefined, query) });
    // A cell run from this page: its kernel is busy from now, so the feed leaves the idle interval at once rather
    // than at its next idle tick (the status bar follows the memory the cell takes).
    NotebookActions.executionScheduled.connect(() => feed.wake());
    // Every open notebook's saved settings apply at each start of its kernel, whether the sidebar shows or not.
    const applier = tracker ? new StartApplier(tracker, trans, feed) : null;
    // The GPU-aware culler's warnings as notifications with "Keep running", whether the sidebar shows or not.
    const culler = new CullerNotices({
      feed,
      trans,
      keep: kernelId =>
        requestAPI<unknown>(API_KEEP, { method: 'POST', body: JSON.stringify({ kernel_id: kernelId }) }),
      store: browserStorage()
    });
    // The out-of-memory card under a cell that raised ResourceExhaustedError, with its buttons (oomcard.ts).
    if (rendermime) {
      rendermime.addFactory(oomRendererFactory({ trans, tracker, applier, feed, rendermime }));
    }
    const sidebar = new GpuSidebar({
      trans,
      feed,
      tracker,
      applier,
      openNotebook: path => {
        void app.commands.execute(CommandIDs.openDocument, { path });
      },
      // The app's own kernel API, as JupyterLab's Running panel shuts kernels down: the notebooks using the
      // kernel see it go.
      shutdownKernel: kernelId => app.serviceManager.kernels.shutdown(kernelId),
      culler
    });
    app.shell.add(sidebar, 'left', { rank: SIDEBAR_RANK });
    if (applier && tracker) {
      // A refusal's notice leads to the saved settings: the notebook in front, then the sidebar open at them.
      applier.showSaved = panel => {
        if (!panel.isDisposed) {
          app.shell.activateById(panel.id);
        }
        app.shell.activateById(sidebar.id);
        requestAnimationFrame(() => sidebar.showSaved());
      };
    }
    if (restorer) {
      restorer.add(sidebar, sidebar.id);
    }

    app.commands.addCommand(CommandIDs.openSidebar, {
      label: trans.__('Show GPUs sidebar'),
      caption: trans.__("Show the server's GPUs and this notebook's TensorFlow GPU setup"),
      icon: gpuIcon,
      execute: () => {
        app.shell.activateById(sidebar.id);
      }
    });
    if (palette) {
      palette.addItem({ command: CommandIDs.openSidebar, category: trans.__('GPUs') });
    }

    // The front notebook's GPU memory, always in view; from the same feed, never from the sidebar.
    const statusItem = statusBar
      ? new GpuStatusItem(feed, tracker, trans, () => void app.commands.execute(CommandIDs.openSidebar))
      : null;
    if (statusBar && statusItem) {
      statusBar.registerStatusItem(STATUS_ITEM_ID, {
        item: statusItem,
        align: 'left',
        rank: STATUS_ITEM_RANK,
        isActive: () => statusItem.shown,
        activeStateChanged: statusItem.shownChanged
      });
      statusItem.enabled = true;
    }

    if (tracker && applier) {
      app.commands.addCommand(CommandIDs.restartAndApply, {
        label: trans.__('Restart kernel and apply saved GPU settings'),
        caption: trans.__(
          "Restart the current notebook's kernel and apply its saved TensorFlow settings (or the ones the kernel refused as too late) before any cell"
        ),
        isEnabled: () => tracker.currentWidget !== null && hasSettings(sidebar.restartSettings()),
        execute: async () => {
          const panel = tracker.currentWidget;
          const settings = sidebar.restartSettings();
          if (panel && settings && hasSettings(settings)) {
            await applier.restartAndApply(panel, settings, sidebar.settingWords(), { link: sidebar.linkOf(panel) });
          }
        }
      });
      app.commands.addCommand(CommandIDs.writeFirstCell, {
        label: trans.__('Write saved GPU settings as first cell'),
        caption: trans.__(
          'Insert %load_ext tfgpu_magic and the saved %tfgpu lines at the top, for running the notebook elsewhere (nbconvert, papermill); the kernel checks them first'
        ),
        // Enabled for any saved settings, even unusable ones: running it says why nothing is written.
        isEnabled: () => {
          const panel = tracker.currentWidget;
          return !!panel && savedOf(panel, sidebar.settingWords()).kind !== 'none';
        },
        execute: async () => {
          const panel = tracker.currentWidget;
          if (!panel) {
            return;
          }
          const verdict = await sidebar.writeFirstCell(panel);
          if (!sidebar.isVisible) {
            // The sidebar shows the verdict where it is open; otherwise it is said here.
            if (verdict.ok) {
              Notification.success(verdict.text, { autoClose: 5000 });
            } else {
              Notification.warning(verdict.text, { autoClose: false });
            }
          }
        }
      });
      if (palette) {
        for (const command of [CommandIDs.restartAndApply, CommandIDs.writeFirstCell]) {
          palette.addItem({ command, category: trans.__('GPUs') });
        }
      }
    }

    if (settingRegistry) {
      settingRegistry
        .load(PLUGIN_ID)
        .then(settings => {
          const apply = (): void => {
            feed.interval = settings.get('refreshInterval').composite as number;
            feed.idleInterval = settings.get('idleRefreshInterval').composite as number;
            if (statusItem) {
              statusItem.enabled = settings.get('statusBar').composite !== false;
            }
          };
          apply();
          settings.changed.connect(apply);
        })
        .catch(reason => {
          console.error(`tfgpu_magic: could not load the settings of ${PLUGIN_ID}`, reason);
        });
    }
  }
};

export default plugin;
