// Unit tests of the sidebar's pure model (labextension/src/model/, compiled to lib/model/ by `jlpm build:lib`).
// Plain Node: `node --test labextension/test/` (`jlpm test`), no extra dependency.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';

import {
  cellRows,
  formatDeltaMiB,
  formatDuration,
  formatInt,
  formatMiB,
  groupByNotebook,
  hiddenSummary,
  isNA,
  linkMessage,
  mergeMessage,
  messageSettingWords,
  messageWords,
  pageSettingWords,
  plainTrans,
  readSettingWords,
  readWords,
  notebookView,
  placementView,
  serverProblem,
  serverView,
  staleLine,
  show,
  statusWords,
  strfmt,
  tfStateWords
} from '../../lib/model/index.js';

const fixture = name => JSON.parse(readFileSync(new URL(`./fixtures/${name}`, import.meta.url), 'utf8'));
const gpus = fixture('gpus.json');
const commState = fixture('comm_state.json');
// tfgpu_magic/core/words.py to_dict(), as the comm's state and the server's answer carry it (`words`).
const WORDS = readWords(fixture('words.json'));

/** Nothing the sidebar prints may be a JavaScript accident. */
function assertNoAccidents(value) {
  const text = JSON.stringify(value);
  for (const accident of ['NaN', 'undefined', '[object Object]', 'null MiB', 'Infinity']) {
    assert.ok(!text.includes(accident), `"${accident}" in ${text}`);
  }
}

const proc = (pid, used, kernel = null, extra = {}) => ({ pid, used_mib: used, name: 'python', user: 'ann', kernel, ...extra });
const kernel = (id, sessions, relation = 'kernel', state = 'idle') => ({
  id,
  name: 'python3',
  execution_state: state,
  relation,
  sessions
});
const nb = path => ({ path, name: path.split('/').pop(), type: 'notebook' });

// -- numbers and "not available" -------------------------------------------------------------------------

test('numbers get thousands separators and units', () => {
  assert.equal(formatInt(0), '0');
  assert.equal(formatInt(999), '999');
  assert.equal(formatInt(40960), '40,960');
  assert.equal(formatInt(1234567), '1,234,567');
  assert.equal(formatInt(-2048), '-2,048');
  assert.equal(formatInt(-0.2), '0');
  assert.equal(formatMiB(1024), '1,024 MiB');
  assert.equal(formatMiB(4.0), '4 MiB');
  assert.equal(formatMiB(0.25), '0.3 MiB');
  assert.equal(formatMiB(123.6), '124 MiB');
  assert.equal(formatDeltaMiB(4), '+4 MiB');
  assert.equal(formatDeltaMiB(-2.5), '\u22122.5 MiB');
  assert.equal(formatDeltaMiB(0), '0 MiB');
  assert.equal(formatDuration(0.01), '10 ms');
  assert.equal(formatDuration(3.135), '3.1 s');
  assert.equal(formatDuration(125), '2 min 5 s');
});

test('a "not available" value shows as n/a with its reason as the tooltip', () => {
  const na = { unavailable: 'no_permission', detail: 'Insufficient Permissions' };
  assert.ok(isNA(na));
  assert.ok(!isNA(null) && !isNA(3) && !isNA('x') && !isNA([]));
  assert.deepEqual(show(na), { text: 'n/a', title: 'Insufficient Permissions', na: true });
  // Without a detail the kind of failure is the reason, in the data's words (else its key as words).
  assert.deepEqual(show({ unavailable: 'function_not_found' }, String, plainTrans, undefined, WORDS), {
    text: 'n/a',
    title: 'not in this driver',
    na: true
  });
  assert.equal(show({ unavailable: 'function_not_found' }).title, 'function not found');
  assert.deepEqual(show(41, v => `${v} °C`), { text: '41 °C', title: '', na: false });
  assert.equal(show(null, String, undefined, 'unknown').text, 'unknown');
  // An unexpected object never prints as [object Object].
  assert.equal(show({ surprise: 1 }).text, 'n/a');
  assert.equal(show(NaN).text, 'n/a');
});

test('placeholders follow JupyterLab: %1 is the first argument, %% a percent sign', () => {
  assert.equal(strfmt('%1 / %2 MiB (%3%)', '1', '2', 73), '1 / 2 MiB (73%)');
  assert.equal(strfmt('100%% of %1', 'GPU 0'), '100% of GPU 0');
  assert.equal(strfmt('%tfgpu placement on'), '%tfgpu placement on');
});

// -- the server's answer -------------------------------------------------------------------------------------

test("the fixture's GPUs become rows: name, memory bar, utilization, temperature", () => {
  const view = serverView(gpus);
  assert.equal(view.problem, null);
  assert.equal(view.driver, 'Driver 550.54.15 · CUDA 12.4');
  assert.equal(view.gpus.length, 3);
  const [a100] = view.gpus;
  assert.equal(a100.heading.text, 'GPU 0 · NVIDIA A100-SXM4-40GB');
  assert.equal(a100.error, null);
  assert.equal(a100.memory.text, '30,000 / 40,960 MiB (73%)');
  assert.equal(a100.memory.percent, 73);
  assert.ok(Math.abs(a100.memory.fraction - 30000 / 40960) < 1e-9);
  assert.equal(a100.utilization.text, '35%');
  assert.equal(a100.temperature.text, '41 °C');
  assert.equal(a100.kernelNote, '');
  assert.equal(view.kernelNote, gpus.kernel_note);
  assertNoAccidents(view);
});

test('a figure NVML does not support shows as n/a with its detail', () => {
  const h100 = serverView(gpus).gpus[1];
  assert.equal(h100.heading.text, 'GPU 1 · NVIDIA H100 80GB HBM3');
  assert.deepEqual(h100.utilization, { text: 'n/a', title: 'utilization', na: true });
  assert.deepEqual(h100.temperature, { text: 'n/a', title: 'temperature', na: true });
  assert.equal(h100.memory.text, '2,048 / 81,920 MiB (3%)');
  assert.equal(h100.kernelNote, gpus.gpus[1].kernel_note);
});

test('a lost GPU: every field n/a, the row shows why instead of figures', () => {
  const lost = serverView(gpus).gpus[2];
  assert.equal(lost.error, 'GPU is lost');
  assert.equal(lost.heading.text, 'GPU 2 · n/a');
  assert.equal(lost.heading.title, 'GPU is lost');
  assert.deepEqual(
    { text: lost.memory.text, title: lost.memory.title, fraction: lost.memory.fraction },
    { text: 'n/a', title: 'GPU is lost', fraction: null }
  );
  assert.deepEqual(lost.utilization, { text: 'n/a', title: 'GPU is lost', na: true });
  assert.deepEqual(lost.temperature, { text: 'n/a', title: 'GPU is lost', na: true });
  assert.equal(lost.processesMissing, 'GPU is lost');
  assert.deepEqual(lost.notebooks, []);
  assert.deepEqual(lost.others, []);
  assert.match(lost.kernelNote, /no process list/);
  assertNoAccidents(lost);
});

test('processes are grouped by notebook: one row per kernel, the memory of its processes summed', () => {
  const a = kernel('k-a', [nb('work/a.ipynb')]);
  const aChild = { ...a, relation: 'child' };
  const b = kernel('k-b', [nb('b.ipynb')], 'kernel', 'busy');
  const { notebooks, others } = groupByNotebook([
    proc(10, 1000, a),
    proc(20, 3000, b),
    proc(11, 500, aChild),
    proc(12, 24, a)
  ]);
  assert.deepEqual(others, []);
  assert.deepEqual(
    notebooks.map(n => [n.label, n.usedMib, n.memory.text, n.openPath]),
    [
      ['b.ipynb', 3000, '3,000 MiB', 'b.ipynb'],
      ['work/a.ipynb', 1524, '1,524 MiB', 'work/a.ipynb']
    ]
  );
  assert.equal(notebooks[0].executionState, 'busy');
  assert.match(notebooks[1].title, /pid 10 \(the kernel\)/);
  assert.match(notebooks[1].title, /pid 11 \(a child process of the kernel\)/);
});

test('the notebook in front is marked, by kernel id or by path', () => {
  const a = kernel('k-a', [nb('work/a.ipynb')]);
  const b = kernel('k-b', [nb('b.ipynb')]);
  const byId = groupByNotebook([proc(1, 1, a), proc(2, 2, b)], { kernelId: 'k-a', path: 'elsewhere.ipynb' });
  assert.deepEqual(
    byId.notebooks.map(n => [n.label, n.isFront, n.mark]),
    [
      ['b.ipynb', false, ''],
      ['work/a.ipynb', true, 'this notebook']
    ]
  );
  const byPath = groupByNotebook([proc(1, 1, a), proc(2, 2, b)], { kernelId: null, path: 'b.ipynb' });
  assert.deepEqual(
    byPath.notebooks.map(n => n.isFront),
    [true, false]
  );
  assert.ok(groupByNotebook([proc(1, 1, a)], null).notebooks.every(n => !n.isFront));
});

test("the fixture's notebooks: a notebook row opens its path, a kernel without a session is named by its kernel", () => {
  const view = serverView(gpus, { path: 'work/train.ipynb', kernelId: 'other' });
  const [train] = view.gpus[0].notebooks;
  assert.equal(train.label, 'work/train.ipynb');
  assert.equal(train.openPath, 'work/train.ipynb');
  assert.equal(train.memory.text, '29,000 MiB');
  assert.equal(train.isFront, true);
  const [bare] = view.gpus[1].notebooks;
  assert.equal(bare.label, 'python3');
  assert.equal(bare.openPath, null);
  assert.equal(bare.memory.text, '1,024 MiB');
  assert.match(bare.title, /child process/);
  assert.match(bare.title, /no notebook or console/);
});

test('memory of a notebook whose processes have no figure reads as missing ("n/a") or "at least"', () => {
  const a = kernel('k-a', [nb('a.ipynb')]);
  const none = groupByNotebook([proc(1, null, a)], null, plainTrans, undefined, WORDS).notebooks[0];
  assert.equal(none.memory.text, 'n/a');
  assert.equal(none.usedMib, null);
  const some = groupByNotebook([proc(1, 100, a), proc(2, null, { ...a, relation: 'child' })]).notebooks[0];
  assert.equal(some.memory.text, 'at least 100 MiB');
  assert.equal(some.memory.title, '1 of its processes has no memory figure');
});

test('a console session is listed but not opened as a document', () => {
  const k = kernel('k-c', [{ path: 'Console 1', name: 'Console 1', type: 'console' }]);
  const [row] = groupByNotebook([proc(1, 64, k)]).notebooks;
  assert.equal(row.label, 'Console 1');
  assert.equal(row.openPath, null);
});

test('a notebook named like HTML stays that exact string (the DOM sets it as text)', () => {
  const evil = '<img src=x onerror=alert(1)>.ipynb';
  assert.ok(gpus.kernels.some(k => k.sessions.some(s => s.path === evil)), 'the fixture names it');
  const k = kernel('k-x', [nb(evil)]);
  const [row] = groupByNotebook([proc(7, 10, k)]).notebooks;
  assert.equal(row.label, evil);
  assert.equal(row.openPath, evil);
  const other = groupByNotebook([proc(8, 10, null, { name: '<b>x</b>' })]).others[0];
  assert.equal(other.name.text, '<b>x</b>');
});

test('processes of no kernel are listed by name, pid and user; a missing figure reads as the data says', () => {
  const view = serverView(gpus);
  assert.deepEqual(
    view.gpus[0].others.map(p => [p.name.text, p.pid.text, p.user.text, p.memory.text]),
    [['systemd', '1', 'root', '1,000 MiB']]
  );
  assert.deepEqual(
    view.gpus[1].others.map(p => [p.name.text, p.pid.text, p.user.text, p.memory.text]),
    [['unnamed', '3999901', 'n/a', 'n/a']]
  );
  // The server's words, not the sidebar's: another vocabulary reads as that one.
  const other = serverView({ ...gpus, words: { ...gpus.words, missing: '—', no_name: '(no name)' } });
  assert.deepEqual(
    other.gpus[1].others.map(p => [p.name.text, p.user.text, p.memory.text]),
    [['(no name)', '—', '—']]
  );
  const na = groupByNotebook([
    proc({ unavailable: 'error', detail: 'pid?' }, { unavailable: 'no_permission', detail: 'denied' })
  ]).others[0];
  assert.equal(na.pid.text, 'n/a');
  assert.deepEqual(na.memory, { text: 'n/a', title: 'denied', na: true });
  assertNoAccidents(na);
});

test('processes of other users hidden by the administrator are summarized', () => {
  assert.equal(serverView(gpus).gpus[1].hidden, '2 processes of other users, 512 MiB');
  assert.equal(serverView(gpus).gpus[0].hidden, null);
  assert.equal(hiddenSummary({ count: 1, used_mib: 40 }), '1 process of other users, 40 MiB');
  assert.equal(hiddenSummary({ count: 3, used_mib: null }, plainTrans, WORDS), '3 processes of other users, memory n/a');
  assert.equal(hiddenSummary({ count: 0, used_mib: 0 }), null);
  assert.equal(hiddenSummary(null), null);
});

test('NVML unavailable: the reason instead of GPUs', () => {
  const answer = {
    ...gpus,
    nvml: {
      available: false,
      error: { unavailable: 'error', detail: 'NVML Shared Library Not Found' },
      driver_version: null,
      cuda_driver_version: null
    },
    gpus: []
  };
  const view = serverView(answer);
  assert.equal(view.problem, 'No GPU figures: NVML Shared Library Not Found');
  assert.deepEqual(view.gpus, []);
  const noError = serverView({ ...answer, nvml: { available: false, error: null } });
  assert.equal(noError.problem, 'No GPU figures: NVML is not available on this server');
  assertNoAccidents(view);
});

test('no GPU, or an answer that is not the expected JSON', () => {
  assert.equal(serverView({ ...gpus, gpus: [] }).empty, 'NVML sees no GPU on this server.');
  for (const bad of [null, 'Not Found', { gpus: [] }, { nvml: { available: true, error: null }, gpus: 'x' }]) {
    assert.match(serverView(bad).problem, /does not understand/);
  }
});

test('the "server not answering" line names what failed', () => {
  assert.equal(serverProblem(null), 'Server not answering; retrying…');
  assert.match(serverProblem(404), /404.*server extension enabled/);
  assert.match(serverProblem(403), /session with the server has ended \(403\)\. Reload the page/);
  assert.equal(serverProblem(502), 'Server not answering (HTTP 502); retrying…');
});

test('every sentence goes through the translation bundle', () => {
  const marked = {
    __: (msgid, ...args) => `«${strfmt(msgid, ...args)}»`,
    _n: (s, p, n, ...args) => `«${strfmt(n === 1 ? s : p, n, ...args)}»`
  };
  const view = serverView(gpus, null, marked);
  assert.equal(view.gpus[0].heading.text, '«GPU 0 · NVIDIA A100-SXM4-40GB»');
  assert.equal(view.gpus[1].hidden, '«2 processes of other users, «512 MiB»»');
  assert.equal(view.gpus[1].utilization.text, '«n/a»');
  assert.equal(notebookView(commState.sections, marked, WORDS).settings[1].status, '«no GPU to apply to»');
  assert.equal(linkMessage('not-loaded', marked).text, '«tfgpu_magic is not loaded in this kernel.»');
});

// -- the kernel comm ----------------------------------------------------------------------------------------

test('a "changes" message replaces only the sections it carries', () => {
  const state = mergeMessage(null, commState);
  assert.deepEqual(Object.keys(state).sort(), ['cells', 'error', 'kernel', 'memory', 'placement']);
  const newCell = {
    cell: 3,
    duration_s: 1.5,
    success: true,
    started_runtime: false,
    devices: [{ device: 'CPU:0', current_mib: 12, delta_mib: 8, peak_mib: 16 }]
  };
  const merged = mergeMessage(state, {
    type: 'changes',
    sections: { cells: [...commState.sections.cells, newCell], error: { message: 'refresh failed: boom' } }
  });
  assert.equal(merged.kernel, state.kernel);
  assert.equal(merged.memory, state.memory);
  assert.equal(merged.cells.length, 3);
  assert.equal(merged.error.message, 'refresh failed: boom');
  assert.equal(state.cells.length, 2, 'the previous sections are not mutated');
  // A later state replaces everything; anything else changes nothing.
  assert.deepEqual(mergeMessage(merged, { type: 'state', sections: { kernel: null } }), { kernel: null });
  assert.equal(mergeMessage(merged, { type: 'hello' }), merged);
  assert.equal(mergeMessage(merged, 'garbage'), merged);
  assert.equal(mergeMessage(merged, { type: 'changes', sections: [] }), merged);
  assert.deepEqual(mergeMessage(null, { type: 'changes', sections: { error: null } }), { error: null });
});

test("the notebook section from comm_state.json: TensorFlow, settings, devices, cells, placement", () => {
  const view = notebookView(mergeMessage(null, commState), plainTrans, messageWords(commState));
  assert.equal(view.connected, true);
  assert.equal(view.tensorflow, 'TensorFlow 2.21.0: initialized');
  assert.match(view.tensorflowNote, /^runtime initialized: visible devices/);
  assert.equal(view.kernel, 'kernel pid 22484 · tfgpu_magic 0.1.0');
  assert.equal(view.error, null);
  assert.deepEqual(
    view.settings.map(s => [s.setting, s.asked, s.status, s.detail, s.level]),
    [
      ['cpus', '2', 'applied', '2 logical CPUs', 'ok'],
      ['growth', 'on', 'no GPU to apply to', 'TensorFlow sees no GPU; the setting applies where there is one', 'warn']
    ]
  );
  assert.equal(view.settingsEmpty, '');
  assert.deepEqual(
    view.devices.map(d => [d.name, d.physical, d.memory, d.note]),
    [
      ['CPU:0', '', '4 MiB (peak 4 MiB)', 'one allocator, shared by every logical CPU'],
      ['CPU:1', '', '4 MiB (peak 4 MiB)', "shares CPU:0's allocator"]
    ]
  );
  assert.equal(view.devicesNote, '');
  assert.deepEqual(
    view.cells.map(c => [c.label, c.duration, c.success, c.devices]),
    [
      ['[1]', '3.1 s', true, ['CPU:0 0 MiB, peak 0 MiB']],
      ['[2]', '10 ms', true, ['CPU:0 +4 MiB, peak 4 MiB']]
    ]
  );
  assert.match(view.cells[0].title, /started TensorFlow's runtime/);
  assert.equal(view.placement.summary, 'last 5 of 37 placements');
  assert.deepEqual(
    view.placement.rows.map(r => [r.cell, r.opType, r.device]),
    [
      ['[2]', '_Retval', 'CPU:0'],
      ['[2]', '_DeviceArg', 'CPU:0'],
      ['[2]', '_Arg', 'CPU:0'],
      ['[2]', 'Fill', 'CPU:0'],
      ['[2]', '_Retval', 'CPU:0']
    ]
  );
  assert.match(view.placement.notes[0], /TF_CPP_MIN_LOG_LEVEL=2/);
  assertNoAccidents(view);
});

test('GPU devices name their physical GPU; devices not listed yet say when they appear', () => {
  const kernelSection = {
    tensorflow: {
      state: 'initialized',
      version: '2.16.2',
      logical_devices: [
        { name: 'GPU:0', device_type: 'GPU', kind: 'logical', physical_index: 1 },
        { name: 'GPU:1', device_type: 'GPU', kind: 'logical', physical_index: 1 }
      ]
    },
    settings: []
  };
  const memory = { devices: [{ device: 'GPU:0', current_mib: 1536, peak_mib: 2048, note: '', shared_with: null }] };
  const view = notebookView({ kernel: kernelSection, memory }, plainTrans, WORDS);
  assert.deepEqual(
    view.devices.map(d => [d.name, d.physical, d.memory]),
    [
      ['GPU:0', 'GPU 1', '1,536 MiB (peak 2,048 MiB)'],
      ['GPU:1', 'GPU 1', '']
    ]
  );
  assert.equal(view.settingsEmpty, 'No setting asked (%tfgpu help lists them).');
  const imported = notebookView({ kernel: { tensorflow: { state: 'imported', version: '2.16.2', logical_devices: null } } });
  assert.match(imported.devicesNote, /when TensorFlow's runtime starts/);
  const notImported = notebookView({ kernel: { tensorflow: { state: 'not_imported', version: null } } }, plainTrans, WORDS);
  assert.equal(notImported.tensorflow, 'TensorFlow: not imported');
  assert.match(notImported.devicesNote, /once TensorFlow is imported/);
  assert.match(notImported.cellsNote, /Per-cell memory/);
  assertNoAccidents([view, imported, notImported]);
});

test('settings that failed are marked as errors', () => {
  const view = notebookView({
    kernel: {
      tensorflow: { state: 'initialized', version: '2.21.0' },
      settings: [
        { setting: 'visible', asked: '0', status: 'refused', detail: 'runtime initialized' },
        { setting: 'limit', asked: 1024, status: 'pending', detail: '' },
        { setting: 'x', asked: 'y', status: 'brand_new', detail: '' }
      ]
    }
  }, plainTrans, WORDS);
  assert.deepEqual(
    view.settings.map(s => [s.asked, s.status, s.level]),
    [
      ['0', 'refused', 'error'],
      ['1024', 'waiting for import', 'info'],
      ['y', 'brand new', 'info']
    ]
  );
});

test('only the last cells and the tail of the placement log are shown', () => {
  const cells = Array.from({ length: 9 }, (_, i) => ({ cell: i + 1, duration_s: 0.5, success: i !== 8, devices: [] }));
  const rows = cellRows(cells, 5);
  assert.deepEqual(
    rows.map(c => c.label),
    ['[5]', '[6]', '[7]', '[8]', '[9]']
  );
  assert.equal(rows[4].success, false);
  const records = Array.from({ length: 20 }, (_, i) => ({ cell: 4, op: `op${i}`, op_type: `T${i}`, short_device: 'GPU:0' }));
  const tail = placementView({ status: { on: true }, records, total: 120 }, 8);
  assert.deepEqual(
    tail.rows.map(r => r.opType),
    ['T12', 'T13', 'T14', 'T15', 'T16', 'T17', 'T18', 'T19']
  );
  assert.equal(tail.summary, 'last 8 of 120 placements');
  assert.equal(placementView({ status: { on: false }, records: [], total: 0 }).summary, 'Placement log off (%tfgpu placement on starts it).');
  assert.equal(placementView({ status: { on: true }, records: [], total: 0 }).summary, 'No placement logged yet.');
  assert.equal(placementView(null), null);
});

test('without the kernel section the notebook is not connected; an error still shows', () => {
  const empty = notebookView(null);
  assert.equal(empty.connected, false);
  assert.deepEqual(empty.settings, []);
  const errorOnly = notebookView({ error: { message: 'sampling failed: OSError', count: 2 } });
  assert.equal(errorOnly.connected, false);
  assert.equal(errorOnly.error, 'sampling failed: OSError');
  const partial = mergeMessage(null, { type: 'state', sections: { cells: [], memory: null } });
  assert.equal(notebookView(partial).connected, false);
});

test('each link status has its line; only a kernel without the extension offers the Load button', () => {
  const statuses = ['starting', 'no-kernel', 'connecting', 'connected', 'not-loaded', 'closed', 'loading', 'restarting', 'dead'];
  const messages = Object.fromEntries(statuses.map(s => [s, linkMessage(s)]));
  assert.equal(messages['not-loaded'].text, 'tfgpu_magic is not loaded in this kernel.');
  assert.deepEqual(
    statuses.filter(s => messages[s].canLoad),
    ['not-loaded', 'closed']
  );
  assert.equal(messages.connected.text, '');
  assert.equal(messages['no-kernel'].text, 'This notebook has no kernel.');
  assert.match(messages.restarting.text, /restarting/);
  assert.equal(messages.dead.level, 'error');
});

test('an answer made while the driver hangs says how old its figures are', () => {
  const answer = {
    schema: 1,
    nvml: { available: true, error: null, driver_version: '550.54.15', cuda_driver_version: '12.4' },
    gpus: [],
    stale: { age_s: 23.4, reason: 'the driver has not answered for 25 s' }
  };
  assert.equal(serverView(answer).stale, 'Figures from 23 s ago: the driver has not answered for 25 s');
  assert.equal(serverView({ ...answer, stale: null }).stale, null);
  assert.equal(staleLine({ age_s: null, reason: 'the driver has not answered for 5 s' }),
    'No figures yet: the driver has not answered for 5 s');
  assert.equal(staleLine(undefined), null);
});

test("the kernel's sentence on why TensorFlow sees no GPU reaches the view as it came", () => {
  const sections = structuredClone(commState.sections);
  const why = "TensorFlow sees none of the 2 GPUs NVML lists: this TensorFlow (tensorflow-cpu 2.21.0) is a CPU-only build";
  sections.kernel.tensorflow.no_gpu = why;
  assert.equal(notebookView(sections).noGpu, why);
  sections.kernel.tensorflow.no_gpu = null;
  assert.equal(notebookView(sections).noGpu, '');
});

// -- one vocabulary: the words come from the data ---------------------------------------------------------

test('the words for states and missing values are the data\'s (the comm\'s state, the server\'s answer)', () => {
  const words = messageWords(commState);
  assert.deepEqual(words, WORDS);
  assert.equal(messageWords({ type: 'changes', sections: {} }), undefined, 'a changes message keeps the last words');
  assert.equal(messageWords({ type: 'state', sections: {} }), null, 'an older kernel sends none');
  assert.deepEqual(statusWords('pending', plainTrans, words), { words: 'waiting for import', level: 'info' });
  assert.deepEqual(statusWords('unchanged', plainTrans, words), { words: 'already in force', level: 'ok' });
  assert.deepEqual(statusWords('no_device', plainTrans, words), { words: 'no such device', level: 'error' });
  assert.equal(tfStateWords('enumerated', plainTrans, words), 'devices listed');
  // Other words in the data are shown as they are: the sidebar keeps no table of its own.
  const other = readWords({ ...WORDS, setting_states: { pending: { words: 'en attente', level: 'warn' } },
    tf_states: { importing: 'import en cours' }, missing: '—' });
  assert.deepEqual(statusWords('pending', plainTrans, other), { words: 'en attente', level: 'warn' });
  assert.equal(tfStateWords('importing', plainTrans, other), 'import en cours');
  const view = notebookView(commState.sections, plainTrans, other);
  assert.equal(view.settings[0].status, 'applied', 'a state the data does not name reads as its key');
  assert.equal(cellRows([{ cell: null, devices: [{ device: 'CPU:0', delta_mib: null, peak_mib: null }] }], 5, plainTrans, other)[0].devices[0],
    'CPU:0 —, peak —');
  assert.equal(cellRows([{ cell: null, devices: [] }], 5, plainTrans, other)[0].label, '[—]');
});

test('without words in the data (an older kernel or server) a key reads as itself, "_" as spaces', () => {
  assert.deepEqual(statusWords('no_gpu', plainTrans, null), { words: 'no gpu', level: 'info' });
  assert.deepEqual(statusWords('applied', plainTrans), { words: 'applied', level: 'info' });
  assert.equal(tfStateWords('not_imported', plainTrans, null), 'not imported');
  const older = serverView({ ...gpus, words: undefined });
  assert.deepEqual(older.gpus[1].others.map(p => p.name.text), ['no name']);
  assert.equal(readWords(null), null);
  assert.equal(readWords('words'), null);
});

test('the words fixture is tfgpu_magic/core/words.py to_dict() (checked where the Python is at hand)', t => {
  const python = new URL('../../.venv/bin/python', import.meta.url).pathname;
  if (!existsSync(python)) {
    t.skip('no .venv/bin/python');
    return;
  }
  const out = execFileSync(python, ['-c', 'import json; from tfgpu_magic.core import words; print(json.dumps(words.to_dict()))'], {
    encoding: 'utf8',
    cwd: new URL('../..', import.meta.url).pathname
  });
  assert.deepEqual(JSON.parse(out), fixture('words.json'));
  assert.deepEqual(gpus.words, fixture('words.json'));
  assert.deepEqual(commState.words, fixture('words.json'));
});

test('the setting words fixture is tfgpu_magic/core/settings wire_words() as the sidebar reads it; both data carry it', t => {
  // The comm's state and the server's answer name the settings alike (`setting_words`).
  assert.deepEqual(gpus.setting_words, fixture('setting_words.json'));
  assert.deepEqual(commState.setting_words, fixture('setting_words.json'));
  const python = new URL('../../.venv/bin/python', import.meta.url).pathname;
  if (!existsSync(python)) {
    t.skip('no .venv/bin/python');
    return;
  }
  const out = execFileSync(python, ['-c', 'import json; from tfgpu_magic.core.settings import wire_words; print(json.dumps(wire_words()))'], {
    encoding: 'utf8',
    cwd: new URL('../..', import.meta.url).pathname
  });
  // What the sidebar reads of it (later keys, such as usage lines, may change without it).
  assert.deepEqual(readSettingWords(JSON.parse(out)), readSettingWords(fixture('setting_words.json')));
});

test('a state message brings the kernel\'s setting words; a changes message keeps the last; the server\'s come first', () => {
  const kernel = messageSettingWords(commState);
  assert.deepEqual(kernel, readSettingWords(fixture('setting_words.json')));
  assert.equal(messageSettingWords({ type: 'changes', sections: {} }), undefined);
  assert.equal(messageSettingWords({ type: 'state', sections: {} }), null); // an older kernel
  assert.equal(messageSettingWords(null), undefined);
  const server = readSettingWords([{ name: 'cpus', per_gpu: false }]);
  assert.equal(pageSettingWords(server, kernel), server);
  assert.equal(pageSettingWords(null, kernel), kernel); // a server that names none
  assert.equal(pageSettingWords(null, undefined), null);
});
