// A GPU chart's figures as text (model/chartfigures.ts): the summary a screen reader hears as the chart's name
// and the table the keyboard reaches, which say what the chart draws. Plain Node: `node --test`.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { chartFigures, chartView, clockTime, figureStepS, hoverAt, mergeHistory } from '../../lib/model/index.js';

const history = gpus => ({ interval_s: 2, kept_s: 3600, sampling: true, note: '', gpus });
const END = 10_000;

/** A GPU of 1,000 MiB sampled every 2 s over the last 10 min: memory and utilization from `at(t)`. */
function sampled(at, utilization = true) {
  const t = [];
  for (let s = END - 600; s <= END; s += 2) {
    t.push(s);
  }
  const series = {
    t,
    memory_used_mib: t.map(s => at(s).mib),
    utilization_gpu_pct: utilization ? t.map(s => at(s).util) : null,
    memory_total_mib: 1000
  };
  return mergeHistory(null, history({ 0: series }), END);
}

test('the summary says the figures now and the peaks over the window, with the device named', () => {
  // 200 MiB and 10% until 3 min ago, then 750 MiB and 95% for a minute, then 500 MiB and 40%.
  const kept = sampled(s =>
    s < END - 180 ? { mib: 200, util: 10 } : s < END - 120 ? { mib: 750, util: 95 } : { mib: 500, util: 40 }
  );
  const view = chartView('0', kept, END, { utilization: true });
  const figures = chartFigures(view, kept.series['0'], 'GPU 0');
  assert.equal(
    figures.summary,
    'GPU 0: memory used 500 MiB (50%) now, peak 750 MiB (75%) in the last 10 min; utilization 40% now, peak 95%'
  );
  assert.deepEqual(figures.columns, ['Time', 'Memory used', 'Utilization']);
});

test('the table has a row a minute, oldest first, each the value the hover says at that moment', () => {
  const kept = sampled(s => ({ mib: Math.round((END - s) / 6), util: 50 }));
  const view = chartView('0', kept, END, { utilization: true });
  const figures = chartFigures(view, kept.series['0'], 'GPU 0');
  assert.equal(figures.rows.length, 11);
  assert.deepEqual(
    figures.rows.map(r => r.ago),
    ['-10 min', '-9 min', '-8 min', '-7 min', '-6 min', '-5 min', '-4 min', '-3 min', '-2 min', '-1 min', 'now']
  );
  figures.rows.forEach((row, i) => {
    const fraction = i / 10;
    const hover = hoverAt(view, fraction);
    const pct = hover.values.match(/mem (\S+)/)[1];
    assert.ok(row.memory.endsWith(`(${pct})`), `${row.ago}: ${row.memory} vs the hover's ${hover.values}`);
    assert.equal(`util ${row.utilization}`, hover.values.split(' · ')[1]);
    assert.equal(row.time, clockTime(END - 600 + fraction * 600));
  });
  assert.equal(figures.rows[10].memory, '0 MiB (0%)');
  assert.equal(figures.rows[0].memory, '100 MiB (10%)');
});

test('a gap reads as the missing word, a MIG device has no utilization, no samples say so', () => {
  // A sampler that stopped 5 min ago: the last 5 minutes are a gap.
  const kept = sampled(s => ({ mib: s <= END - 300 ? 300 : null, util: null }), false);
  const view = chartView('0', kept, END, { utilization: false });
  const figures = chartFigures(view, kept.series['0'], 'MIG 3g.20gb · slot 1');
  assert.deepEqual(figures.columns, ['Time', 'Memory used']);
  assert.equal(figures.rows[10].memory, 'n/a');
  assert.equal(figures.rows[10].utilization, null);
  assert.equal(figures.rows[0].memory, '300 MiB (30%)');
  assert.equal(
    figures.summary,
    'MIG 3g.20gb · slot 1: memory used n/a now, peak 300 MiB (30%) in the last 10 min'
  );

  const none = chartView('9', kept, END, { utilization: true });
  assert.equal(chartFigures(none, undefined, 'GPU 9').summary, 'GPU 9: No samples yet');
});

test('without the MiB figures the table says percentages; a longer window steps by a tenth of it', () => {
  const kept = sampled(() => ({ mib: 250, util: 5 }));
  const view = chartView('0', kept, END, { utilization: true });
  assert.equal(chartFigures(view, undefined, 'GPU 0').rows[10].memory, '25%');
  assert.equal(figureStepS(600), 60);
  assert.equal(figureStepS(3600), 360);
  assert.equal(figureStepS(60), 60);
});
