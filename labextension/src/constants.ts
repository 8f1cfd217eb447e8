/**
 * Every id, name and path the sidebar shares with JupyterLab or with the Python side, in one place.
 */

// schema and protocol versions; the Python side names the same five in tfgpu_magic/core/version.py
export const SNAPSHOT_SCHEMA = 1;   // the snapshot's JSON shape (kernel section)
export const GPUS_SCHEMA = 1;       // GET tfgpu/api/gpus document
export const COMM_PROTOCOL = 1;     // messages on the tfgpu comm
export const COMM_OPEN_VERSION = 1; // the comm's open request
export const SAVED_VERSION = 1;     // notebook metadata.tfgpu version

/** The npm package and the plugin id (its settings schema is labextension/schema/sidebar.json). */
export const PACKAGE = 'tfgpu_magic';
export const PLUGIN_ID = `${PACKAGE}:sidebar`;

/** The sidebar panel's DOM id (also LabShell's tab `data-id` and the layout restorer's key). */
export const SIDEBAR_ID = 'tfgpu-sidebar';
export const SIDEBAR_RANK = 1000;

/** The status-bar item (the front notebook's GPU memory): its id in the status bar, and its place on the left. */
export const STATUS_ITEM_ID = `${PACKAGE}:status`;
export const STATUS_ITEM_RANK = 4;

/** The LabIcon's registered name. */
export const ICON_NAME = `${PACKAGE}:gpu`;

/** Commands. */
export namespace CommandIDs {
  export const openSidebar = 'tfgpu:open-sidebar';
  /** Restart the current notebook's kernel and apply its saved settings (or the refused ones) at the start. */
  export const restartAndApply = 'tfgpu:restart-and-apply';
  /** Insert the saved settings as `%tfgpu` lines in a first cell (for nbconvert, papermill). */
  export const writeFirstCell = 'tfgpu:write-first-cell';
  /** JupyterLab's (and Notebook 7's) own command that opens a document by path. */
  export const openDocument = 'docmanager:open';
}

/**
 * The server extension's REST routes, below the server's base URL: GET tfgpu/api/gpus, and POST tfgpu/api/consent
 * (the user's agreement to a notebook's saved settings, kept on the server: tfgpu_magic/core/consent.py).
 */
export const API_NAMESPACE = ['tfgpu', 'api'];
export const API_GPUS = 'gpus';
export const API_CONSENT = 'consent';
/** POST tfgpu/api/keep `{"kernel_id"}`: keep a kernel the GPU-aware culler warned about running. */
export const API_KEEP = 'keep';

/** The kernel comm target that `%load_ext tfgpu_magic` registers, and what the sidebar opens it with. */
export const COMM_TARGET = 'tfgpu';
export const COMM_OPEN_DATA = { request: 'subscribe', version: COMM_OPEN_VERSION };

/** The notebook metadata key that carries the saved settings (its shape: model/saved.ts `readSaved`). */
export const METADATA_KEY = 'tfgpu';

/** Comm requests the sidebar sends besides the open: stop and start sampling while it is hidden / shown. */
export const COMM_PAUSE = { request: 'pause' };
export const COMM_RESUME = { request: 'resume' };
/** Whether the page is shown (`document.visibilityState`): the kernel pauses its pushes while no page of it is. */
export function commPage(visible: boolean): { request: 'page'; visible: boolean } {
  return { request: 'page', visible };
}

/** The code cell the "Load tfgpu_magic" button inserts at the top of the notebook. */
export const LOAD_EXTENSION_SOURCE = '%load_ext tfgpu_magic';

/**
 * The Python the sidebar runs in a kernel to apply the saved settings at its start (model/apply.ts): the
 * module, the user expression that reads its result back, and the call with the metadata document.
 *
 * The kernel's working directory is the notebook's folder and comes first on `sys.path` (as ''): a
 * `tfgpu_magic/` folder shipped beside the notebook would be imported instead of the installed package, and
 * so would a `pynvml.py` the apply imports to read NVML: opening the notebook would run its code. So for the
 * whole call `sys.path` holds neither '' nor '.' nor the working directory (other explicit entries stay: an
 * editable install's folder is one), and is put back as it was afterwards (with any entry the call added).
 * Helper names are bound for the call only. Not installed: ModuleNotFoundError, which the sidebar reads as
 * "not installed". The user expression reads the module from `sys.modules` only, so it imports nothing
 * either (ipykernel evaluates it only after the code succeeded).
 */
export const PY_APPLY_MODULE = 'tfgpu_magic.ipython.apply';
const PY_PACKAGE = PY_APPLY_MODULE.split('.')[0];
const PY_INSTALLED = [
  'def _tfgpu_installed():',
  '    import importlib, importlib.machinery, importlib.util, sys',
  `    if ${JSON.stringify(PY_PACKAGE)} not in sys.modules:`,
  `        spec = importlib.machinery.PathFinder.find_spec(${JSON.stringify(PY_PACKAGE)}, sys.path)`,
  '        if spec is None:',
  `            raise ModuleNotFoundError("No module named ${PY_PACKAGE} in this kernel's environment", name=${JSON.stringify(PY_PACKAGE)})`,
  '        package = importlib.util.module_from_spec(spec)',
  `        sys.modules[${JSON.stringify(PY_PACKAGE)}] = package`,
  '        try:',
  '            spec.loader.exec_module(package)',
  '        except BaseException:',
  `            del sys.modules[${JSON.stringify(PY_PACKAGE)}]`,
  '            raise',
  `    return importlib.import_module(${JSON.stringify(PY_APPLY_MODULE)})`
].join('\n');
export const PY_APPLY_USER_EXPRESSION = `__import__('sys').modules[${JSON.stringify(PY_APPLY_MODULE)}].last_result()`;
/** The apply call; the document's JSON text goes in as a JSON string literal, which Python reads too. */
export function pyApplyCall(documentJson: string): string {
  return [
    PY_INSTALLED,
    'import os as _tfgpu_os, sys as _tfgpu_sys',
    '_tfgpu_path = list(_tfgpu_sys.path)',
    '_tfgpu_here = _tfgpu_os.path.realpath(_tfgpu_os.getcwd())',
    '_tfgpu_sys.path[:] = [p for p in _tfgpu_path',
    '                      if not (isinstance(p, str) and (p in ("", ".") or _tfgpu_os.path.realpath(p) == _tfgpu_here))]',
    'try:',
    `    _tfgpu_installed().apply_json(${JSON.stringify(documentJson)})`,
    'finally:',
    '    _tfgpu_sys.path[:] = _tfgpu_path + [p for p in _tfgpu_sys.path if p not in _tfgpu_path]',
    '    del _tfgpu_installed, _tfgpu_os, _tfgpu_sys, _tfgpu_path, _tfgpu_here'
  ].join('\n');
}

/** The translation domain of every string a person reads. */
export const TRANSLATION_DOMAIN = PACKAGE;

/** Defaults that mirror the settings schema. */
export const DEFAULT_REFRESH_S = 2;
export const MIN_REFRESH_S = 0.5;
export const MAX_REFRESH_S = 60;
/** While every kernel is idle and nothing is warned: the `idleRefreshInterval` setting's default and range. */
export const DEFAULT_IDLE_REFRESH_S = 60;
export const MIN_IDLE_REFRESH_S = 5;
export const MAX_IDLE_REFRESH_S = 3600;
/** After the user opens or uses the sidebar, the feed asks at `refreshInterval` for this long, idle or not. */
export const AWAKE_MS = 60000;
/** How long the "keeps running" notification stays. */
export const KEPT_NOTICE_MS = 5000;
/** How long a failed "Keep running" stays said. */
export const KEEP_FAILED_MS = 15000;
/** How long one request may take before the sidebar says "Server not answering" (the server answers a hung
 * driver's request with the last figures within its `stale_after`, 5 s by default). */
export const REQUEST_TIMEOUT_MS = 10000;
/** The longest wait between two polls while the server does not answer (backoff). */
export const MAX_BACKOFF_MS = 60000;

