// The GPU-aware idle culler in the sidebar's model (labextension/src/model/culler.ts) and the feed's pace
// (labextension/src/feed.ts): the answer's `culler`, `all_idle` and kernels' `activity` read; one notification per
// warned kernel across answers; what "Keep running" says; the "shut down" lines and those dismissed in this browser;
// the kernel's pause; and how often the feed asks while everything is idle. `node --test labextension/test/`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

import { GpuFeed } from '../../lib/feed.js';
import {
  AnswerState,
  cullName,
  DismissedReleases,
  groupByNotebook,
  kernelActivity,
  keepOutcome,
  pausedLine,
  pausedReason,
  pollSeconds,
  readActivity,
  readAllIdle,
  readCuller,
  releasedKey,
  releasedLines,
  serverView,
  WarningNotices
} from '../../lib/model/index.js';

const gpus = JSON.parse(readFileSync(new URL('./fixtures/gpus.json', import.meta.url), 'utf8'));
const K1 = '8c1d0f6e-0000-4000-8000-000000000001';
const K2 = '8c1d0f6e-0000-4000-8000-000000000002';

const warning = (kernelId, shutdownAt, text, extra = {}) => ({
  kernel_id: kernelId,
  notebook: 'work/train.ipynb',
  used_mib: 12288,
  gpus: [1],
  shutdown_at: shutdownAt,
  text,
  ...extra
});
const released = (kernelId, at, text, extra = {}) => ({
  kernel_id: kernelId,
  notebook: 'work/train.ipynb',
  at,
  reason: 'idle',
  freed_mib: 12288,
  gpus: [1],
  text,
  ...extra
});
const cullerDoc = (extra = {}) => ({ on: true, after_s: 3600, warning_s: 300, warnings: [], released: [], ...extra });

// -- reading the answer --------------------------------------------------------------------------------------------

test('the culler read from the answer: warnings once per kernel, entries without a kernel or a text left out', () => {
  assert.equal(readCuller(undefined), null); // an older server
  assert.equal(readCuller('on'), null);
  const culler = readCuller(
    cullerDoc({
      warnings: [
        warning(K1, 1000, 'train.ipynb will be shut down in 4 min 50 s: idle 55 min, holding 12 GiB on GPU 1'),
        warning(K1, 1000, 'a second warning of the same kernel'),
        { kernel_id: K2, text: '' },
        { text: 'no kernel' },
        'junk'
      ],
      released: [released(K2, 900, 'Shut down eval.ipynb at 14:05'), { kernel_id: K2, text: 'no time' }]
    })
  );
  assert.equal(culler.on, true);
  assert.equal(culler.warningS, 300);
  assert.deepEqual(culler.warnings, [
    {
      kernelId: K1,
      notebook: 'work/train.ipynb',
      usedMib: 12288,
      gpus: [1],
      shutdownAt: 1000,
      text: 'train.ipynb will be shut down in 4 min 50 s: idle 55 min, holding 12 GiB on GPU 1'
    }
  ]);
  assert.equal(culler.released.length, 1);
  assert.equal(culler.released[0].at, 900);
  assert.equal(readCuller({ on: 'yes', warnings: 'none' }).on, false); // only true is on
  assert.deepEqual(readCuller({}).warnings, []);
});

test('all_idle is only ever true when the answer says so; the feed keeps it with the culler, false after a failure', () => {
  assert.equal(readAllIdle({ all_idle: true }), true);
  assert.equal(readAllIdle({ all_idle: 'true' }), false);
  assert.equal(readAllIdle(gpus), false); // an older server: never idle, so never the slow pace
  const state = new AnswerState();
  state.take({ ...gpus, all_idle: true, culler: cullerDoc({ warnings: [warning(K1, 1000, 'w')] }) });
  assert.equal(state.allIdle, true);
  assert.equal(state.culler.warnings[0].kernelId, K1);
  state.fail(null);
  assert.equal(state.allIdle, false);
  assert.equal(state.culler.warnings.length, 1); // the last warnings stand
});

test("a kernel's activity: the server's sentence under the notebook, tfgpu's state for the row's emphasis", () => {
  assert.equal(readActivity(null), null);
  assert.deepEqual(readActivity({ state: 'gpu_busy', text: ' busy on GPU 1 (child pid 4242) ', gpu: 1, pid: 4242, child: true }), {
    state: 'gpu_busy',
    idleS: null,
    text: 'busy on GPU 1 (child pid 4242)',
    gpu: 1,
    pid: 4242,
    child: true
  });
  const base = { id: K1, name: 'python3', relation: 'kernel', sessions: [], execution_state: 'idle', idle_s: 30 };
  const busy = kernelActivity({ ...base, activity: { state: 'gpu_busy', text: 'busy on GPU 1 (child pid 4242)' } });
  assert.equal(busy.text, 'busy on GPU 1 (child pid 4242)'); // not "idle" from the execution state
  assert.equal(busy.state, 'gpu_busy');
  assert.match(busy.title, /works on the GPU/);
  const idle = kernelActivity({ ...base, activity: { state: 'idle', idle_s: 2520, text: 'idle 42 min · holds 12 GiB' } });
  assert.equal(idle.text, 'idle 42 min · holds 12 GiB');
  assert.match(idle.title, /42 min/);
  // An older server, or an activity with no text: the execution state as before.
  assert.deepEqual(
    [kernelActivity(base).text, kernelActivity(base).state, kernelActivity({ ...base, activity: { state: 'idle', text: '' } }).text],
    ['idle < 1 min', '', 'idle < 1 min']
  );
  // Through the rows: the notebook's group carries both.
  const kernel = { ...base, activity: { state: 'gpu_busy', text: 'busy on GPU 1' } };
  const { notebooks } = groupByNotebook([{ pid: 1, used_mib: 10, name: 'python', user: 'ann', kernel }]);
  assert.equal(notebooks[0].activity, 'busy on GPU 1');
  assert.equal(notebooks[0].activityState, 'gpu_busy');
  // And from the answer's kernels (a process row says only {id, relation}).
  const answer = structuredClone(gpus);
  answer.kernels[0].activity = { state: 'idle', idle_s: 60, text: 'idle 1 min · holds 4.0 GiB' };
  const rows = serverView(answer).gpus.flatMap(g => g.notebooks).filter(n => n.kernelId === K1);
  assert.ok(rows.length > 0);
  assert.ok(rows.every(n => n.activity === 'idle 1 min · holds 4.0 GiB'));
});

test('what a warned kernel is called: its notebook, else the start of its id', () => {
  assert.equal(cullName({ kernelId: K1, notebook: 'work/train.ipynb' }), 'train.ipynb');
  assert.equal(cullName({ kernelId: K1, notebook: null }), 'kernel 8c1d0f6e');
});

// -- how often the feed asks ------------------------------------------------------------------------------------------

test('the pace: the idle interval only while all is idle and nothing warned; never slower than a third of the warning', () => {
  const on = readCuller(cullerDoc({ warning_s: 300 }));
  assert.equal(pollSeconds(on, true, 2, 60), 60);
  assert.equal(pollSeconds(on, true, 2, 600), 100); // warning 300 s: at least every 100 s
  assert.equal(pollSeconds(on, false, 2, 60), 2); // a kernel busy
  assert.equal(pollSeconds(on, true, 2, 60, true), 2); // the user just opened the sidebar
  const warned = readCuller(cullerDoc({ warnings: [warning(K1, 1000, 'w')] }));
  assert.equal(pollSeconds(warned, true, 2, 60), 2); // a warning: its time left stays right
  const off = readCuller(cullerDoc({ on: false, warning_s: 300 }));
  assert.equal(pollSeconds(off, true, 2, 600), 600); // no culler: nothing to reach the page in time
  assert.equal(pollSeconds(null, true, 2, 600), 600);
  assert.equal(pollSeconds(readCuller(cullerDoc({ warning_s: 3 })), true, 2, 60), 2); // never faster than the usual
  assert.equal(pollSeconds(readCuller(cullerDoc({ warning_s: 0 })), true, 2, 60), 60);
});

// -- one notification per warned kernel ---------------------------------------------------------------------------------

test('notifications: one per kernel across answers, its text kept current, closed when the warning goes', () => {
  const notices = new WarningNotices();
  const answer = (...warnings) => readCuller(cullerDoc({ warnings }));
  let plan = notices.plan(answer(warning(K1, 1000, 'in 4 min 50 s')));
  assert.deepEqual(plan.open.map(w => w.kernelId), [K1]);
  notices.opened(plan.open[0], 'n1');
  plan = notices.plan(answer(warning(K1, 1000, 'in 4 min 50 s')));
  assert.deepEqual(plan, { open: [], update: [], close: [] }); // the same answer again: nothing
  plan = notices.plan(answer(warning(K1, 1000, 'in 4 min 48 s'), warning(K2, 1100, 'eval in 6 min')));
  assert.deepEqual(plan.update.map(u => [u.id, u.warning.text]), [['n1', 'in 4 min 48 s']]);
  assert.deepEqual(plan.open.map(w => w.kernelId), [K2]);
  notices.opened(plan.open[0], 'n2');
  assert.equal(notices.kernelOf('n2'), K2);
  plan = notices.plan(answer(warning(K2, 1100, 'eval in 5 min'))); // K1 kept, busy again or shut down
  assert.deepEqual(plan.close, [{ kernelId: K1, id: 'n1' }]);
  assert.equal(notices.idOf(K1), null);
  plan = notices.plan(null); // an older server's answer, or the culler gone: every notification closed
  assert.deepEqual(plan.close, [{ kernelId: K2, id: 'n2' }]);
  assert.deepEqual(notices.ids(), []);
});

test('notifications: kept or closed by the user, not opened again for the same warning; a later warning is new', () => {
  const notices = new WarningNotices();
  const answer = (...warnings) => readCuller(cullerDoc({ warnings }));
  let plan = notices.plan(answer(warning(K1, 1000, 'in 5 min')));
  notices.opened(plan.open[0], 'n1');
  assert.equal(notices.closed(K1, 1000), 'n1'); // "Keep running" answered 200: its notification to dismiss
  assert.equal(notices.kernelOf('n1'), null);
  // A request made before the keep still carries the warning: no second notification.
  plan = notices.plan(answer(warning(K1, 1000, 'in 4 min 58 s')));
  assert.deepEqual(plan, { open: [], update: [], close: [] });
  // Idle that long again: a new warning (another shutdown time), a new notification.
  plan = notices.plan(answer(warning(K1, 5000, 'in 5 min')));
  assert.deepEqual(plan.open.map(w => w.shutdownAt), [5000]);
  notices.opened(plan.open[0], 'n3');
  // A later warning while one is open replaces it: the old notification closes, the new one opens.
  plan = notices.plan(answer(warning(K1, 9000, 'in 5 min')));
  assert.deepEqual([plan.close, plan.open.length], [[{ kernelId: K1, id: 'n3' }], 1]);
  notices.opened(plan.open[0], 'n4');
  // The user closed it: the sidebar still lists the warning, the page does not open it again.
  notices.closed(K1, null);
  assert.deepEqual(notices.plan(answer(warning(K1, 9000, 'in 4 min'))), { open: [], update: [], close: [] });
  // Gone from the answer and back with the same time (the server restarted the count): a new notification.
  notices.plan(answer());
  assert.equal(notices.plan(answer(warning(K1, 9000, 'in 5 min'))).open.length, 1);
});

// -- keep running -------------------------------------------------------------------------------------------------------

test('what "Keep running" says: kept, no longer warned (404 with the server\'s reason), no answer, another status', () => {
  assert.deepEqual(keepOutcome('train.ipynb', 200), { ok: true, text: 'train.ipynb keeps running' });
  assert.equal(
    keepOutcome('train.ipynb', 404, 'tfgpu: kernel 8c1d0f6e is not warned').text,
    'Could not keep train.ipynb running: tfgpu: kernel 8c1d0f6e is not warned'
  );
  assert.match(keepOutcome('train.ipynb', 404).text, /no longer warned/);
  assert.equal(keepOutcome('train.ipynb', null).text, 'Could not keep train.ipynb running: the server did not answer.');
  assert.equal(keepOutcome('train.ipynb', 403, 'Forbidden').text, 'Could not keep train.ipynb running (HTTP 403): Forbidden');
  assert.equal(keepOutcome('train.ipynb', 500).ok, false);
});

// -- released kernels -----------------------------------------------------------------------------------------------------

function memoryStore(initial = {}) {
  const items = { ...initial };
  return { items, getItem: key => (key in items ? items[key] : null), setItem: (key, value) => (items[key] = String(value)) };
}

test('"shut down" lines: most recent first, at most 3, those dismissed here hidden on this and the next page load', () => {
  const culler = readCuller(
    cullerDoc({
      released: [
        released(K1, 100, 'Shut down a.ipynb at 10:00'),
        released(K2, 400, 'Shut down d.ipynb at 10:05'),
        released(K1, 300, 'Shut down c.ipynb at 10:04'),
        released(K2, 200, 'Shut down b.ipynb at 10:02')
      ]
    })
  );
  const store = memoryStore();
  const dismissed = new DismissedReleases(store);
  assert.deepEqual(releasedLines(culler, dismissed).map(r => r.at), [400, 300, 200]);
  dismissed.dismiss(culler.released.find(r => r.at === 400));
  assert.deepEqual(releasedLines(culler, dismissed).map(r => r.at), [300, 200, 100]);
  assert.equal(releasedKey({ kernelId: K2, at: 400 }), `${K2}@400`);
  // A page load: the browser's storage remembers it.
  assert.deepEqual(releasedLines(culler, new DismissedReleases(store)).map(r => r.at), [300, 200, 100]);
  // The same kernel shut down again later is a new line.
  const again = readCuller(cullerDoc({ released: [released(K2, 900, 'Shut down d.ipynb at 10:20')] }));
  assert.deepEqual(releasedLines(again, new DismissedReleases(store)).map(r => r.at), [900]);
  assert.deepEqual(releasedLines(null, dismissed), []);
});

test('dismissed lines: a broken or refusing storage never breaks the sidebar; the list stays bounded', () => {
  const line = { kernelId: K1, at: 1 };
  const broken = new DismissedReleases(memoryStore({ 'tfgpu_magic:culler-released-dismissed': '{not json' }));
  assert.equal(broken.has(line), false);
  const full = new DismissedReleases({
    getItem: () => null,
    setItem: () => {
      throw new Error('QuotaExceededError');
    }
  });
  full.dismiss(line);
  assert.equal(full.has(line), true); // for this page at least
  const none = new DismissedReleases(null);
  none.dismiss(line);
  assert.equal(none.has(line), true);
  const store = memoryStore();
  const many = new DismissedReleases(store);
  for (let at = 0; at < 250; at++) {
    many.dismiss({ kernelId: K1, at });
  }
  const kept = JSON.parse(store.items['tfgpu_magic:culler-released-dismissed']);
  assert.equal(kept.length, 200);
  assert.equal(kept[199], `${K1}@249`); // the oldest forgotten first
});

// -- the kernel's pause ---------------------------------------------------------------------------------------------------

test("the kernel's pause: its reason read from a `paused` message; any other message is not one", () => {
  assert.equal(pausedReason({ type: 'paused', reason: 'idle' }), 'idle');
  assert.equal(pausedReason({ type: 'paused' }), '');
  assert.equal(pausedReason({ type: 'state', sections: {} }), null);
  assert.equal(pausedReason({ type: 'something-new' }), null);
  assert.equal(pausedReason(null), null);
  assert.equal(pausedLine('idle'), 'paused: the kernel is idle');
  assert.equal(pausedLine('hidden'), 'paused: the page is hidden');
  assert.equal(pausedLine('other'), 'paused by the kernel');
});

// -- the feed's pace on hand-moved timers ---------------------------------------------------------------------------------

async function advance(t, ms) {
  for (let moved = 0; moved < ms; moved += 100) {
    t.mock.timers.tick(Math.min(100, ms - moved));
    await new Promise(resolve => setImmediate(resolve));
  }
}

function paced(t, answer, options = {}) {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  const clock = { now: 0 };
  const requests = [];
  const feed = new GpuFeed({
    request: query => {
      requests.push(clock.now);
      return Promise.resolve(answer());
    },
    interval: 2,
    idleInterval: 60,
    now: () => clock.now,
    ...options
  });
  t.after(() => feed.dispose());
  const move = async ms => {
    for (let moved = 0; moved < ms; moved += 100) {
      clock.now += 100;
      await advance(t, 100);
    }
  };
  return { feed, requests, move };
}

test('the feed: every idle interval while all is idle, at the usual one as soon as a kernel is busy', async t => {
  let doc = { ...gpus, all_idle: true, culler: cullerDoc({ on: false }) };
  const { feed, requests, move } = paced(t, () => doc);
  feed.need('sidebar', true, false);
  await move(200);
  assert.equal(feed.pollInterval, 60);
  const before = requests.length;
  await move(59000);
  assert.equal(requests.length, before); // nothing for a minute
  await move(1500);
  assert.equal(requests.length, before + 1);
  doc = { ...gpus, all_idle: false, culler: cullerDoc({ on: false }) };
  await move(61000); // the answer after the next says busy
  assert.equal(feed.pollInterval, 2);
  const busy = requests.length;
  await move(4100);
  assert.equal(requests.length, busy + 2); // every 2 s again
});

test('the feed: with the culler on never slower than a third of its warning, and every interval while one is warned', async t => {
  let doc = { ...gpus, all_idle: true, culler: cullerDoc({ warning_s: 30 }) };
  const { feed, requests, move } = paced(t, () => doc, { idleInterval: 600 });
  feed.need('statusbar', true, false);
  await move(200);
  assert.equal(feed.pollInterval, 10); // 30 s warning: every 10 s
  doc = { ...gpus, all_idle: true, culler: cullerDoc({ warning_s: 30, warnings: [warning(K1, 1000, 'in 30 s')] }) };
  await move(10100);
  assert.equal(feed.pollInterval, 2);
  const warned = requests.length;
  await move(4100);
  assert.equal(requests.length, warned + 2);
});

test('the feed: the user waking it asks at once and at the usual interval for a minute; a new setting applies at once', async t => {
  const doc = { ...gpus, all_idle: true, culler: cullerDoc({ on: false }) };
  const { feed, requests, move } = paced(t, () => doc);
  feed.need('sidebar', true, false);
  await move(200);
  assert.equal(feed.pollInterval, 60);
  const before = requests.length;
  feed.wake(); // the sidebar opened or clicked
  await move(200);
  assert.equal(requests.length, before + 1); // at once
  assert.equal(feed.pollInterval, 2);
  await move(30000);
  assert.ok(requests.length >= before + 15, `${requests.length - before} requests in 30 s awake`);
  await move(32000); // a minute after the wake the answers' idleness counts again
  assert.equal(feed.pollInterval, 60);
  feed.idleInterval = 1; // clamped to the schema's minimum, applied at once
  assert.equal(feed.idleInterval, 5);
  await move(200);
  assert.equal(feed.pollInterval, 5);
  feed.idleInterval = 1e9;
  assert.equal(feed.idleInterval, 3600);
});

test('the feed: an older server (no all_idle, no culler) is polled at the usual interval, idle setting or not', async t => {
  const { feed, requests, move } = paced(t, () => gpus);
  feed.need('sidebar', true, false);
  await move(200);
  assert.equal(feed.pollInterval, 2);
  assert.equal(feed.culler, null);
  const before = requests.length;
  await move(6100);
  assert.equal(requests.length, before + 3);
});
