// Unit tests of "Restart kernel and apply"'s pure logic (labextension/src/model/restart.ts): what the dialog saves,
// leaves out and marks; the notice a refusal at kernel start raises; the apply verdict brought up to date once
// TensorFlow's import settled what waited for it. `node --test labextension/test/`.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import {
  applyStatusView,
  freshOutcomes,
  plainTrans,
  restartPlan,
  startRefusalNotice
} from '../../lib/model/index.js';

const SETTINGS = { visible: '9', growth: 'on', limit: ['2GB --gpu 0', '3GB --gpu 1'] };

test('the kernel refused a value: it is left out with its reason, the rest is saved, one line per value', () => {
  const answer = {
    id: 1,
    ok: false,
    errors: { visible: 'tfgpu: no GPU 9: this machine has GPUs 0-3; pick one of them' },
    unchecked: {}
  };
  const plan = restartPlan(SETTINGS, answer, 'unused', plainTrans);
  assert.deepEqual(plan.settings, { growth: 'on', limit: ['2GB --gpu 0', '3GB --gpu 1'] });
  assert.deepEqual(
    plan.kept.map(l => l.text),
    ['growth on', 'limit 2GB --gpu 0', 'limit 3GB --gpu 1']
  );
  assert.ok(plan.kept.every(l => l.reason === ''));
  assert.deepEqual(plan.leftOut, [
    { setting: 'visible', text: 'visible 9', reason: 'no GPU 9: this machine has GPUs 0-3; pick one of them' }
  ]);
  assert.equal(plan.note, '');
});

test('a value taken as given (NVML cannot list the GPUs) is saved, marked with why', () => {
  const answer = { id: 2, ok: true, errors: {}, unchecked: { visible: 'GPU 9 not checked: NVML is not installed' } };
  const plan = restartPlan({ visible: '9', growth: 'on' }, answer, '', plainTrans);
  assert.deepEqual(plan.settings, { visible: '9', growth: 'on' });
  assert.deepEqual(plan.kept, [
    { setting: 'visible', text: 'visible 9', reason: 'GPU 9 not checked: NVML is not installed' },
    { setting: 'growth', text: 'growth on', reason: '' }
  ]);
  assert.deepEqual(plan.leftOut, []);
});

test('no kernel to ask: everything is saved, and why nothing was checked is said once', () => {
  const plan = restartPlan({ cpus: '2', growth: 'on' }, null, 'tfgpu_magic is not loaded in this kernel', plainTrans);
  assert.deepEqual(plan.settings, { cpus: '2', growth: 'on' });
  assert.equal(plan.note, 'tfgpu_magic is not loaded in this kernel');
  assert.ok(plan.kept.every(l => l.reason === ''), 'the reason is said once, not on every line');
});

test('the whole document refused: nothing is left to save', () => {
  const plan = restartPlan({ cpus: '2' }, { id: 3, ok: false, errors: { '': 'tfgpu: bad' }, unchecked: {} }, '', plainTrans);
  assert.deepEqual(plan.settings, {});
  assert.deepEqual(plan.leftOut, [{ setting: 'cpus', text: 'cpus 2', reason: 'bad' }]);
});

const refusedAtStart = (extra = {}) => ({
  kind: 'done',
  afterRestart: false,
  kernelName: 'Python 3',
  reply: {
    kind: 'result',
    ok: false,
    message: 'tfgpu: no GPU 9: this machine has GPUs 0-3',
    outcomes: [],
    placement: null,
    notApplied: [],
    reason: null
  },
  ...extra
});

test('a refusal at kernel start raises a notice that names the notebook and the reason; other states none', () => {
  assert.deepEqual(startRefusalNotice(refusedAtStart(), 'lesson.ipynb', plainTrans), {
    text: 'lesson.ipynb: saved GPU settings refused at kernel start: no GPU 9: this machine has GPUs 0-3',
    level: 'error'
  });
  assert.equal(startRefusalNotice(refusedAtStart({ consented: true }), 'a.ipynb', plainTrans), null);
  assert.equal(startRefusalNotice(refusedAtStart({ cancelled: true }), 'a.ipynb', plainTrans), null);
  const ranCells = refusedAtStart();
  ranCells.reply = { ...ranCells.reply, reason: 'ran_cells' };
  assert.equal(startRefusalNotice(ranCells, 'a.ipynb', plainTrans), null);
  const ok = refusedAtStart();
  ok.reply = { ...ok.reply, ok: true, message: null };
  assert.equal(startRefusalNotice(ok, 'a.ipynb', plainTrans), null);
  assert.equal(startRefusalNotice(null, 'a.ipynb', plainTrans), null);
  assert.equal(startRefusalNotice({ kind: 'applying', afterRestart: true }, 'a.ipynb', plainTrans), null);
  assert.equal(startRefusalNotice({ kind: 'skipped', message: 'newer' }, 'a.ipynb', plainTrans).level, 'warning');
  const missing = { ...refusedAtStart(), reply: { kind: 'not-installed', message: 'ModuleNotFoundError' } };
  assert.match(startRefusalNotice(missing, 'a.ipynb', plainTrans).text, /not installed/);
});

test("after the import, the verdict says what became of what waited for it, not 'waiting for import'", () => {
  const outcomes = [
    { setting: 'visible', asked: '1', status: 'pending', detail: 'applied when TensorFlow is imported' },
    { setting: 'limit', asked: '2GB --gpu 1', status: 'pending', detail: '' },
    { setting: 'cpus', asked: '2', status: 'applied', detail: '2 logical CPUs' }
  ];
  const kernel = {
    settings: [
      { setting: 'visible', asked: '1', status: 'applied', detail: 'GPU 1 as GPU:0' },
      { setting: 'limit[1]', asked: '2GB', status: 'no_gpu', detail: 'no GPU to apply to' },
      { setting: 'cpus', asked: '2', status: 'applied', detail: 'changed since' }
    ]
  };
  assert.deepEqual(freshOutcomes(outcomes, kernel), [
    { setting: 'visible', asked: '1', status: 'applied', detail: 'GPU 1 as GPU:0' },
    { setting: 'limit', asked: '2GB --gpu 1', status: 'no_gpu', detail: 'no GPU to apply to' },
    outcomes[2] // settled at the apply already: it stays as the apply said
  ]);
  assert.deepEqual(freshOutcomes(outcomes, null), outcomes);
  const state = {
    kind: 'done',
    afterRestart: false,
    kernelName: 'Python 3',
    reply: { kind: 'result', ok: true, message: null, outcomes, placement: null, notApplied: [], reason: null }
  };
  assert.match(applyStatusView(state, plainTrans, null, null).text, /visible 1 → pending/);
  const fresh = applyStatusView(state, plainTrans, null, kernel).text;
  assert.doesNotMatch(fresh, /pending/);
  assert.match(fresh, /visible 1 → applied \(GPU 1 as GPU:0\)/);
});
