// The GPU charts' model: history merged from answer to answer (?history=600, then &since=T), and the
// geometry drawn from it (steps, gaps, ticks, the values under the pointer). Plain Node: `node --test`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

import {
  CHART_W,
  chartView,
  hoverAt,
  historyQuery,
  maxHoldOf,
  mergeHistory,
  stepArea,
  stepPath,
  stepRuns,
  timeTicks,
  valueAt,
  yOf
} from '../../lib/model/index.js';

const shared = JSON.parse(readFileSync(new URL('./fixtures/gpus_shared.json', import.meta.url), 'utf8'));

const series = (t, memory, util = memory.map(() => 50), total = 1000) => ({
  t,
  memory_used_mib: memory,
  utilization_gpu_pct: util,
  memory_total_mib: total
});
const history = (gpus, extra = {}) => ({ interval_s: 2, kept_s: 3600, sampling: true, note: '', gpus, ...extra });

// -- merging ------------------------------------------------------------------------------------------------

test('the first request asks the whole window, later ones only what is newer than the last sample', () => {
  assert.deepEqual(historyQuery(null), { history: '600' });
  const kept = mergeHistory(null, history({ 0: series([100, 102, 104], [1, 2, 3]) }), 104);
  assert.equal(kept.latest, 104);
  assert.deepEqual(historyQuery(kept), { history: '600', since: '104' });
  // An answer without history (an older server) keeps nothing: the next request asks the whole window again.
  assert.equal(mergeHistory(kept, undefined, 106), null);
  assert.equal(mergeHistory(kept, null, 106), null);
});

test('a since-answer is appended; a sample already kept is never doubled', () => {
  let kept = mergeHistory(null, history({ 0: series([100, 102, 104], [1, 2, 3]) }), 104);
  // The server answers t > since; one it sends again (a clock tick on the edge) is dropped.
  kept = mergeHistory(kept, history({ 0: series([104, 106, 108], [3, 4, null]) }), 108);
  assert.deepEqual(kept.series['0'].t, [100, 102, 104, 106, 108]);
  assert.deepEqual(kept.series['0'].memoryUsedMib, [1, 2, 3, 4, null]);
  assert.deepEqual(kept.series['0'].utilizationPct, [50, 50, 50, 50, 50]);
  assert.equal(kept.latest, 108);
  // A GPU with no new sample in this answer keeps what it had.
  kept = mergeHistory(kept, history({}), 109);
  assert.deepEqual(kept.series['0'].t, [100, 102, 104, 106, 108]);
});

test('samples older than the window are dropped, but the last one before it stays (its value holds into it)', () => {
  const t = [0, 100, 200, 300, 400];
  let kept = mergeHistory(null, history({ 0: series(t, [1, 2, 3, 4, 5]) }), 400, 250);
  // Window [150, 400]: 100 held until 200, so it stays; 0 goes.
  assert.deepEqual(kept.series['0'].t, [100, 200, 300, 400]);
  // A GPU whose samples all lie before the window is gone (the server no longer sees it).
  kept = mergeHistory(kept, history({ 1: series([1000], [7]) }), 1000, 250);
  assert.deepEqual(Object.keys(kept.series), ['1']);
});

test('a MIG device has no utilization; the sampler off and its note are kept', () => {
  const mig = { t: [10, 12], memory_used_mib: [5, 6], utilization_gpu_pct: null, memory_total_mib: 20 };
  const kept = mergeHistory(null, history({ 'MIG-x': mig }, { sampling: false, note: 'NVML unavailable' }), 12);
  assert.equal(kept.series['MIG-x'].utilizationPct, null);
  assert.equal(kept.sampling, false);
  assert.equal(kept.note, 'NVML unavailable');
  // A series whose arrays do not line up is ignored rather than drawn wrong.
  const bad = mergeHistory(null, history({ 0: { t: [1, 2], memory_used_mib: [1], utilization_gpu_pct: null } }), 2);
  assert.deepEqual(bad.series, {});
});

// -- steps and gaps -------------------------------------------------------------------------------------------

test('a sample holds until the next one: runs of steps, a null sample is a gap', () => {
  const runs = stepRuns([0, 10, 20, 30, 40], [5, 7, null, 9, 9], 0, 50, 15);
  assert.deepEqual(runs, [
    [
      { t0: 0, t1: 10, v: 5 },
      { t0: 10, t1: 20, v: 7 }
    ],
    [
      { t0: 30, t1: 40, v: 9 },
      { t0: 40, t1: 50, v: 9 }
    ]
  ]);
});

test('no sample for longer than the hold limit is a gap too; the window clips the first step', () => {
  // 10 -> 100: the server stopped sampling for a while; the value holds 15 s, then nothing is drawn.
  const runs = stepRuns([0, 10, 100], [1, 2, 3], 5, 110, 15);
  assert.deepEqual(runs, [
    [
      { t0: 5, t1: 10, v: 1 },
      { t0: 10, t1: 25, v: 2 }
    ],
    [{ t0: 100, t1: 110, v: 3 }]
  ]);
  assert.equal(maxHoldOf(2), 6);
});

test('the path is steps: horizontal holds and vertical edges only, never a ramp; one subpath per run', () => {
  const scale = { start: 0, end: 100 };
  const runs = stepRuns([0, 50, 60, 80], [0, 100, null, 50], 0, 100, 1000);
  const d = stepPath(runs, scale);
  const y0 = yOf(0);
  const y100 = yOf(100);
  const y50 = yOf(50);
  assert.equal(d, `M0 ${y0}H${CHART_W / 2}V${y100}H${CHART_W * 0.6}M${CHART_W * 0.8} ${y50}H${CHART_W}`);
  // Every command after a move is H or V: no diagonal segment can appear.
  assert.match(d, /^(M[\d.]+ [\d.]+(?:[HV][\d.]+)+)+$/);
  // The area under it closes each run down to 0%, leaving the gap empty.
  const area = stepArea(runs, scale);
  assert.equal((area.match(/Z/g) || []).length, 2);
  assert.ok(area.startsWith(`M0 ${y0}V${y0}H${CHART_W / 2}V${y100}`));
  assert.equal(stepPath([], scale), '');
});

test('percentages map into the box, 100% at the top, clamped, with room for a line at either edge', () => {
  assert.ok(yOf(100) > 0 && yOf(100) < yOf(50) && yOf(50) < yOf(0));
  assert.equal(yOf(150), yOf(100));
  assert.equal(yOf(-3), yOf(0));
});

// -- ticks and hover ----------------------------------------------------------------------------------------

test('time ticks read -10 min, -5 min, now over the 10-minute window', () => {
  assert.deepEqual(timeTicks(1000, 1600), [
    { fraction: 0, label: '-10 min' },
    { fraction: 0.5, label: '-5 min' },
    { fraction: 1, label: 'now' }
  ]);
  // A shorter window: steps of 15 s, a whole minute in minutes.
  assert.deepEqual(
    timeTicks(0, 60).map(t => t.label),
    ['-1 min', '-45 s', '-30 s', '-15 s', 'now']
  );
  assert.deepEqual(timeTicks(5, 5), []);
});

test('the value under the pointer is the one holding there; a gap reads n/a', () => {
  const t = [0, 10, 20];
  const v = [1, null, 3];
  assert.equal(valueAt(t, v, -1, 15), null);
  assert.equal(valueAt(t, v, 0, 15), 1);
  assert.equal(valueAt(t, v, 9.9, 15), 1);
  assert.equal(valueAt(t, v, 10, 15), null);
  assert.equal(valueAt(t, v, 34, 15), 3);
  assert.equal(valueAt(t, v, 36, 15), null); // held longer than allowed
});

test("the fixture's charts: memory as % of total with a gap, utilization beside it, MIG devices memory only", () => {
  const kept = mergeHistory(null, shared.history, shared.taken_at);
  const end = shared.taken_at;
  const h100 = chartView('1', kept, end, { utilization: true });
  assert.deepEqual(
    h100.series.map(s => s.id),
    ['memory', 'utilization']
  );
  const memory = h100.series[0];
  // 1,000 then 30,000 of 81,920 MiB; ten unreadable samples make two subpaths.
  assert.equal((memory.path.match(/M/g) || []).length, 2);
  assert.ok(Math.abs(memory.pct[0] - (1000 / 81920) * 100) < 1e-9);
  assert.ok(Math.abs(memory.pct[299] - (30000 / 81920) * 100) < 1e-9);
  assert.equal(h100.ticks.map(t => t.label).join(' '), '-10 min -5 min now');
  assert.equal(h100.empty, '');
  assert.match(h100.summary, /memory used 37%, utilization 10%/);

  const mig = chartView('MIG-5e8b0c1a-2f3d-5a6b-9c7d-0e1f2a3b4c5d', kept, end, { utilization: false });
  assert.deepEqual(
    mig.series.map(s => s.id),
    ['memory']
  );
  assert.match(mig.summary, /^Memory used over the last 10 min; now: memory used 5%$/);

  // A GPU the history does not know yet: axes, no lines, and words saying so.
  const unknown = chartView('7', kept, end, { utilization: true });
  assert.equal(unknown.empty, 'No samples yet');
  assert.ok(unknown.series.every(s => s.path === ''));

  // The hover: the time and both values; a gap in the samples reads n/a.
  const right = hoverAt(h100, 1);
  assert.equal(right.x, CHART_W);
  assert.match(right.text, /^\d\d:\d\d:\d\d · mem 37% · util 10%$/);
  // The label's two lines: the clock time, then the values.
  assert.match(right.time, /^\d\d:\d\d:\d\d$/);
  assert.equal(right.values, 'mem 37% · util 10%');
  const inGap = hoverAt(h100, (shared.history.gpus['1'].t[105] - h100.start) / 600);
  assert.match(inGap.text, /mem n\/a · util n\/a$/);
  const migHover = hoverAt(mig, 0.5);
  assert.match(migHover.text, /^\d\d:\d\d:\d\d · mem 5%$/);
});

test('a GPU whose memory total is unknown draws no memory line rather than a wrong one', () => {
  const kept = mergeHistory(null, history({ 0: series([0, 2], [10, 20], [30, 40], null) }), 2);
  const view = chartView('0', kept, 2, { utilization: true });
  assert.equal(view.series[0].path, '');
  assert.notEqual(view.series[1].path, '');
  const withTotal = chartView('0', kept, 2, { utilization: true, totalMib: 100 });
  assert.notEqual(withTotal.series[0].path, '');
});

test('a value the samples lack is named with the data\'s word for a missing value', () => {
  const kept = mergeHistory(null, history({ 0: series([100, 102], [null, null], [null, null]) }), 102);
  const view = chartView('0', kept, 102, { utilization: true, words: { missing: 'WORD', settingStates: {}, tfStates: {}, missingReasons: {}, noName: '' } });
  assert.match(view.summary, /memory used WORD, utilization WORD/);
  assert.match(hoverAt(view, 1).values, /mem WORD · util WORD/);
});
