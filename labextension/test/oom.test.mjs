// Unit tests of the out-of-memory card's pure logic (labextension/src/model/oom.ts): reading the kernel's JSON
// (application/vnd.tfgpu.oom+json, /tmp/briefs/oom_contract.md), the card's lines and figures, the Restart
// button's settings and its question. The settings there are come from the data (fixtures/setting_words.json).
// `node --test labextension/test/`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

import {
  cellsAbove,
  cellsText,
  exactBytes,
  formatBytes,
  FREE_MEMORY_CODE,
  OOM_MIME_TYPE,
  OOM_RANK,
  oomView,
  readOom,
  restartDoneText,
  restartQuestion,
  restartSettings,
  settingsWords
} from '../../lib/model/oom.js';
import { plainTrans, readSettingWords } from '../../lib/model/index.js';

const fixture = name => JSON.parse(readFileSync(new URL(`./fixtures/${name}`, import.meta.url), 'utf8'));
const SETTINGS = readSettingWords(fixture('setting_words.json'));
// The registry may not have every setting a card suggests yet: a word for one, as the data would bring it.
const WITH_ALLOCATOR = SETTINGS.some(word => word.name === 'allocator')
  ? SETTINGS
  : [...SETTINGS, { name: 'allocator', perGpu: false, placeholder: 'async / bfc' }];

const GiB = 2 ** 30;
const MiB = 2 ** 20;

/** The contract's example of a GPU card. */
const GPU_CARD = {
  schema: 1,
  kind: 'gpu',
  error: 'ResourceExhaustedError',
  message:
    'OOM when allocating tensor with shape[1024,1024,1024] and type float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc',
  asked: { shape: [1024, 1024, 1024], dtype: 'float', bytes: 4 * GiB, device: 'GPU:0', allocator: 'GPU_0_bfc' },
  physical_index: 1,
  tf_memory: { current_bytes: 1536 * MiB, peak_bytes: 3 * GiB },
  settings: [
    ['growth', 'on'],
    ['limit[0]', '40%']
  ],
  gpu: { name: 'NVIDIA H100 80GB HBM3', total_bytes: 80 * GiB, free_bytes: 512 * MiB },
  holders: [
    { notebook: 'other.ipynb', pid: 4242, user: 'bob', bytes: 60 * GiB, mine: false, text: 'other.ipynb (kernel of this server)' },
    { notebook: 'this.ipynb', pid: 77, user: 'me', bytes: 2 * GiB, mine: true, text: 'this.ipynb' },
    { notebook: null, pid: 9, user: null, bytes: null, mine: false, text: 'pid 9 (not this server)' }
  ],
  cause: 'Another notebook holds most of GPU 1.',
  steps: [
    { magic: '%tfgpu allocator async', why: 'return memory to the GPU between steps' },
    { magic: null, why: 'a smaller batch' }
  ],
  suggested: { allocator: 'async' },
  execution_count: 12
};

const CPU_CARD = {
  schema: 1,
  kind: 'cpu',
  error: 'ResourceExhaustedError',
  message: 'OOM when allocating tensor with shape[1099511627776] and type float on /job:localhost/replica:0/task:0/device:CPU:0 by allocator mklcpu',
  asked: { shape: [1099511627776], dtype: 'float', bytes: 4398046511104, device: 'CPU:0', allocator: 'mklcpu' },
  physical_index: null,
  tf_memory: { current_bytes: null, peak_bytes: null },
  settings: [],
  gpu: null,
  holders: [],
  cause: 'The tensor is larger than the host memory.',
  steps: [{ magic: null, why: 'a smaller tensor' }],
  suggested: {},
  execution_count: 3
};

const rowsOf = view => Object.fromEntries(view.rows.map(row => [row.key, row]));

// -- the type and its rank ---------------------------------------------------------------------------------

test('the MIME type is the contract\'s, ranked before text/html (50) and the free code is the magic', () => {
  assert.equal(OOM_MIME_TYPE, 'application/vnd.tfgpu.oom+json');
  assert.ok(OOM_RANK < 50, `rank ${OOM_RANK}`);
  assert.equal(FREE_MEMORY_CODE, '%tfgpu free');
});

// -- bytes -------------------------------------------------------------------------------------------------

test('bytes: the largest binary unit at 1 or more, whole or one decimal; exact bytes for tooltips', () => {
  assert.equal(formatBytes(0), '0 bytes');
  assert.equal(formatBytes(1), '1 byte');
  assert.equal(formatBytes(800), '800 bytes');
  assert.equal(formatBytes(1024), '1 KiB');
  assert.equal(formatBytes(1536 * MiB), '1.5 GiB');
  assert.equal(formatBytes(512 * MiB), '512 MiB');
  assert.equal(formatBytes(4398046511104), '4 TiB');
  assert.equal(formatBytes(80 * GiB), '80 GiB');
  assert.equal(formatBytes(2 ** 60), '1,024 PiB');
  assert.equal(exactBytes(4398046511104), '4,398,046,511,104 bytes');
  assert.equal(exactBytes(1), '1 byte');
});

// -- reading ------------------------------------------------------------------------------------------------

test('the contract\'s GPU example reads as is', () => {
  const read = readOom(GPU_CARD);
  assert.equal(read.kind, 'ok');
  assert.equal(read.newer, false);
  const r = read.report;
  assert.equal(r.kind, 'gpu');
  assert.deepEqual(r.asked, GPU_CARD.asked);
  assert.equal(r.physicalIndex, 1);
  assert.deepEqual(r.tfMemory, { current: 1536 * MiB, peak: 3 * GiB });
  assert.deepEqual(r.settings, [['growth', 'on'], ['limit[0]', '40%']]);
  assert.deepEqual(r.gpu, { name: 'NVIDIA H100 80GB HBM3', total: 80 * GiB, free: 512 * MiB });
  assert.equal(r.holders.length, 3);
  assert.deepEqual(r.suggested, { allocator: 'async' });
  assert.equal(r.executionCount, 12);
  assert.deepEqual(r.steps, GPU_CARD.steps);
});

test('not an object is no card; a bad schema says so; a newer one is read for what it knows', () => {
  assert.equal(readOom(null).kind, 'invalid');
  assert.equal(readOom([1]).kind, 'invalid');
  assert.match(readOom({ schema: 'x' }).message, /schema/);
  const newer = readOom({ ...GPU_CARD, schema: 2, future: { x: 1 } });
  assert.equal(newer.kind, 'ok');
  assert.equal(newer.newer, true);
  assert.match(oomView(newer).note, /newer tfgpu_magic \(schema 2\)/);
});

test('fields of the wrong shape are left out, never shown as [object Object]', () => {
  const read = readOom({
    kind: 'gpu',
    asked: { shape: 'big', bytes: -1, dtype: 3 },
    tf_memory: 'none',
    settings: [['growth', 'on'], 'limit', [3, 'x'], ['cpus', 2]],
    gpu: { name: 7, total_bytes: 'lots', free_bytes: 1024 },
    holders: [{ text: '' }, 'bob', { pid: 5 }, { text: ' other ', bytes: '9' }],
    steps: [{ magic: '%tfgpu growth on' }, {}, 'do it', { why: 'because' }],
    suggested: { allocator: ' async ', limit: ['40% --gpu 0', ''], cpus: 3, growth: '' },
    execution_count: 1.5
  });
  assert.equal(read.kind, 'ok');
  const r = read.report;
  assert.deepEqual(r.asked, { shape: null, dtype: null, bytes: null, device: null, allocator: null });
  assert.deepEqual(r.tfMemory, { current: null, peak: null });
  assert.deepEqual(r.settings, [['growth', 'on'], ['cpus', '2']]);
  assert.deepEqual(r.gpu, { name: null, total: null, free: 1024 });
  assert.deepEqual(r.holders.map(h => [h.text, h.bytes]), [['pid 5', null], ['other', null]]);
  assert.deepEqual(r.steps, [{ magic: '%tfgpu growth on', why: '' }, { magic: null, why: 'because' }]);
  assert.deepEqual(r.suggested, { allocator: 'async' });
  assert.equal(r.executionCount, null);
  const text = JSON.stringify(oomView(read));
  assert.doesNotMatch(text, /object Object|undefined|NaN/);
});

// -- the card -------------------------------------------------------------------------------------------------

test('a GPU card: what was asked, where, TensorFlow\'s figures, the settings, the GPU, holders, cause, steps', () => {
  const view = oomView(readOom(GPU_CARD));
  assert.equal(view.title, 'Out of GPU memory on GPU:0 (GPU 1)');
  assert.equal(view.summary, 'TensorFlow could not allocate 4 GiB.');
  const rows = rowsOf(view);
  assert.deepEqual(Object.keys(rows), ['asked', 'device', 'tensorflow', 'settings', 'gpu']);
  assert.equal(rows.asked.value, '4 GiB (float, shape [1024, 1024, 1024])');
  assert.equal(rows.asked.title, '4,294,967,296 bytes');
  assert.equal(rows.device.value, 'GPU:0 (GPU 1), allocator GPU_0_bfc');
  assert.equal(rows.tensorflow.value, '1.5 GiB in use, peak 3 GiB (this kernel)');
  assert.equal(rows.tensorflow.title, 'in use: 1,610,612,736 bytes; peak: 3,221,225,472 bytes');
  assert.equal(rows.settings.value, 'growth on, limit[0] 40%');
  assert.equal(rows.gpu.label, 'GPU 1');
  assert.equal(rows.gpu.value, 'NVIDIA H100 80GB HBM3: 512 MiB free of 80 GiB');
  assert.equal(view.holdersTitle, 'Holding memory on GPU 1');
  assert.deepEqual(
    view.holders.map(h => [h.text, h.figure, h.mine]),
    [
      ['other.ipynb (kernel of this server)', '60 GiB', false],
      ['this.ipynb', '2 GiB', true],
      ['pid 9 (not this server)', '', false]
    ]
  );
  assert.equal(view.cause, 'Another notebook holds most of GPU 1.');
  assert.deepEqual(view.steps, GPU_CARD.steps);
  assert.match(view.message, /^ResourceExhaustedError: OOM when allocating tensor/);
  assert.deepEqual(view.restart, {
    label: 'Restart with allocator async',
    words: 'allocator async',
    settings: { allocator: 'async' }
  });
  assert.equal(view.note, null);
});

test('a CPU card: host memory, no GPU row, no holder list, missing figures as n/a, no Restart without suggestions', () => {
  const view = oomView(readOom(CPU_CARD));
  assert.equal(view.title, 'Out of host memory on CPU:0');
  assert.equal(view.summary, 'TensorFlow could not allocate 4 TiB.');
  const rows = rowsOf(view);
  assert.deepEqual(Object.keys(rows), ['asked', 'device', 'tensorflow', 'settings']);
  assert.equal(rows.asked.value, '4 TiB (float, shape [1099511627776])');
  assert.equal(rows.asked.title, '4,398,046,511,104 bytes');
  assert.equal(rows.device.value, 'CPU:0, allocator mklcpu');
  assert.equal(rows.tensorflow.value, 'n/a in use, peak n/a (this kernel)');
  assert.equal(rows.tensorflow.na, true);
  assert.equal(rows.settings.value, "none: TensorFlow's defaults");
  assert.equal(view.holdersTitle, null);
  assert.equal(view.restart, null);
});

test('a GPU card without figures of the GPU says n/a rather than inventing them', () => {
  const view = oomView(readOom({ ...GPU_CARD, gpu: null, physical_index: null, holders: [], asked: { bytes: null } }));
  const rows = rowsOf(view);
  assert.equal(view.title, 'Out of GPU memory on a GPU');
  assert.equal(view.summary, 'TensorFlow could not allocate the memory it asked for.');
  assert.equal(rows.asked.value, 'n/a');
  assert.equal(rows.gpu.label, 'GPU');
  assert.equal(rows.gpu.value, 'n/a: n/a free of n/a');
  assert.equal(view.holdersTitle, 'Holding memory on this GPU');
  assert.deepEqual(view.holders, []);
});

test('the card\'s texts go through the translation', () => {
  const seen = [];
  const trans = {
    __: (msgid, ...args) => {
      seen.push(msgid);
      return plainTrans.__(msgid, ...args);
    },
    _n: (msgid, plural, n, ...args) => {
      seen.push(msgid);
      return plainTrans._n(msgid, plural, n, ...args);
    }
  };
  oomView(readOom(GPU_CARD, trans), trans);
  restartQuestion({ allocator: 'async' }, {}, cellsAbove(['code', 'code'], 2), trans);
  for (const msgid of ['Out of GPU memory on %1', 'Asked', 'Restart with %1', 'Restart the kernel with %1?', '%1 GiB']) {
    assert.ok(seen.includes(msgid), msgid);
  }
});

// -- the Restart button ---------------------------------------------------------------------------------------

test('the settings to save: the saved ones with the suggested over them, in apply order, checked', () => {
  const merged = restartSettings({ growth: 'on', cpus: '2' }, { allocator: 'async' }, WITH_ALLOCATOR);
  assert.equal(merged.ok, true);
  assert.deepEqual(merged.settings, { cpus: '2', growth: 'on', allocator: 'async' });
  // In the registry's apply order, wherever it puts each.
  const order = WITH_ALLOCATOR.map(word => word.name).filter(name => name in merged.settings);
  assert.deepEqual(Object.keys(merged.settings), order);
  assert.deepEqual(merged.kept, { cpus: '2', growth: 'on' });

  const over = restartSettings({ limit: '2GB' }, { limit: '60%' }, WITH_ALLOCATOR);
  assert.deepEqual(over.settings, { limit: '60%' });
  assert.deepEqual(over.kept, {});

  // A setting the server does not name (an older server): nothing saved, and why.
  const unknown = restartSettings({}, { nonesuch: 'on' }, WITH_ALLOCATOR);
  assert.equal(unknown.ok, false);
  assert.match(unknown.message, /unknown saved setting "nonesuch"; valid: visible, /);
  const bad = restartSettings({}, { allocator: 'a\nb' }, WITH_ALLOCATOR);
  assert.equal(bad.ok, false);
  assert.match(bad.message, /control character/);
});

test('the cells above: code cells only, by position; the failing cell\'s position', () => {
  assert.deepEqual(cellsAbove(['code', 'code', 'code', 'code', 'code'], 4), { code: [1, 2, 3, 4], failing: 5 });
  assert.deepEqual(cellsAbove(['markdown', 'code', 'raw', 'code', 'code'], 4), { code: [2, 4], failing: 5 });
  assert.deepEqual(cellsAbove(['code'], 0), { code: [], failing: 1 });
  assert.equal(cellsText([1, 2, 3, 4]), 'cells 1–4');
  assert.equal(cellsText([3]), 'cell 3');
  assert.equal(cellsText([]), '');
  assert.equal(settingsWords({ allocator: 'async', limit: ['2GB --gpu 0', '4GB --gpu 1'] }), 'allocator async, limit 2GB --gpu 0, limit 4GB --gpu 1');
});

test('the question names the settings, the cells it runs again with their side effects, and the failing cell', () => {
  const q = restartQuestion({ allocator: 'async' }, {}, cellsAbove(['code', 'code', 'code', 'code', 'code'], 4));
  assert.equal(q.title, 'Restart the kernel with allocator async?');
  assert.deepEqual(q.body, [
    'allocator async is saved in this notebook and applied at every start of its kernel, before any cell.',
    'The kernel restarts: its variables are lost.',
    'Then cells 1–4 above the failing one run again (4 code cells); they may have side effects.',
    'The failing cell (cell 5) does not run.'
  ]);
  assert.equal(q.accept, 'Restart and run cells 1–4');

  const one = restartQuestion({ allocator: 'async' }, { cpus: '2' }, cellsAbove(['markdown', 'code', 'code'], 2));
  assert.match(one.body[1], /^Its other saved settings apply too: cpus 2\.$/);
  assert.match(one.body[3], /^Then cell 2 above the failing one runs again \(1 code cell\); it may have side effects\.$/);
  assert.equal(one.accept, 'Restart and run cell 2');

  const none = restartQuestion({ allocator: 'async' }, {}, cellsAbove(['code'], 0));
  assert.equal(none.body[2], 'No cell runs again: there is no code cell above the failing one.');
  assert.equal(none.accept, 'Restart');
});

test('what the card says after the restart', () => {
  const cells = cellsAbove(['code', 'code', 'code'], 2);
  assert.equal(restartDoneText('allocator async', cells, true), 'Kernel restarted with allocator async; cells 1–2 ran again.');
  assert.match(restartDoneText('allocator async', cells, false), /a cell above failed again/);
  assert.equal(restartDoneText('allocator async', cellsAbove(['code'], 0), true), 'Kernel restarted with allocator async.');
});
