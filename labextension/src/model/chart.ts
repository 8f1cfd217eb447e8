/**
 * A GPU's chart as geometry: memory used (% of total) and utilization (%) over the window, drawn as steps
 * (a sample's value holds until the next sample, a change is a vertical edge), with gaps where a sample
 * could not be read or none came for a while; time ticks, and the values under the pointer. Coordinates
 * are in the chart's own box (CHART_W x CHART_H), which the SVG stretches to the sidebar's width.
 */

import { clockTime, formatInt, isNumber, missingWord, plainTrans, Trans } from './format.js';
import { HISTORY_WINDOW_S, KeptHistory, KeptSeries } from './history.js';
import type { Words } from './words.js';

export const CHART_W = 300;
export const CHART_H = 60;
/** Room above 100% and below 0%, so a line at either edge is drawn whole. */
export const CHART_PAD = 2;

/** A value held from t0 to t1. */
export interface Step {
  t0: number;
  t1: number;
  v: number;
}

/**
 * The steps of one series within [start, end], as runs: within a run each step starts where the one before
 * ended; between runs there is a gap. A sample holds until the next one, but never longer than `maxHold`
 * (a sampler that stopped, a server restarted): after that the chart shows a gap, not an invented value.
 */
export function stepRuns(
  t: number[],
  v: (number | null)[],
  start: number,
  end: number,
  maxHold: number
): Step[][] {
  const runs: Step[][] = [];
  let run: Step[] = [];
  const close = () => {
    if (run.length) {
      runs.push(run);
    }
    run = [];
  };
  for (let i = 0; i < t.length; i++) {
    const value = v[i];
    if (!isNumber(value)) {
      close();
      continue;
    }
    const next = i + 1 < t.length ? t[i + 1] : end;
    const t1 = Math.min(next, t[i] + maxHold, end);
    const t0 = Math.max(t[i], start);
    if (t1 <= t0) {
      continue; // before the window (or a sample at its very end)
    }
    const previous = run.length ? run[run.length - 1] : null;
    if (previous && previous.t1 !== t0) {
      close();
    }
    run.push({ t0, t1, v: value });
    if (t1 < next) {
      close(); // held as long as allowed: a gap until the next sample
    }
  }
  close();
  return runs;
}

export interface Scale {
  start: number;
  end: number;
}

const round = (n: number) => String(Math.round(n * 100) / 100);

export function xOf(t: number, scale: Scale): number {
  const span = scale.end - scale.start;
  return span > 0 ? ((t - scale.start) / span) * CHART_W : 0;
}

/** A percentage's height in the box (0% at the bottom, 100% at the top; out-of-range values clamped). */
export function yOf(pct: number): number {
  const clamped = Math.min(100, Math.max(0, pct));
  return CHART_PAD + (1 - clamped / 100) * (CHART_H - 2 * CHART_PAD);
}

/** The SVG path of the runs: horizontal holds joined by vertical edges, one subpath per run. */
export function stepPath(runs: Step[][], scale: Scale): string {
  const parts: string[] = [];
  for (const run of runs) {
    run.forEach((step, i) => {
      const y = round(yOf(step.v));
      parts.push(i === 0 ? `M${round(xOf(step.t0, scale))} ${y}` : `V${y}`);
      parts.push(`H${round(xOf(step.t1, scale))}`);
    });
  }
  return parts.join('');
}

/** The area under the runs (down to 0%), closed per run: a gap stays empty. */
export function stepArea(runs: Step[][], scale: Scale): string {
  const base = round(yOf(0));
  const parts: string[] = [];
  for (const run of runs) {
    parts.push(`M${round(xOf(run[0].t0, scale))} ${base}`);
    for (const step of run) {
      parts.push(`V${round(yOf(step.v))}`, `H${round(xOf(step.t1, scale))}`);
    }
    parts.push(`V${base}Z`);
  }
  return parts.join('');
}

/** A tick on the time axis: where (0 … 1 of the width) and its label ("-10 min", "-5 min", "now"). */
export interface Tick {
  fraction: number;
  label: string;
}

/** Ticks at round steps back from `end` (3 to 5 of them), labelled by how long ago. */
export function timeTicks(start: number, end: number, trans: Trans = plainTrans): Tick[] {
  const span = end - start;
  if (!(span > 0)) {
    return [];
  }
  const steps = [15, 30, 60, 120, 300, 600, 900, 1800, 3600];
  const step = steps.find(s => span / s <= 4) ?? steps[steps.length - 1];
  const ticks: Tick[] = [];
  for (let ago = 0; ago <= span + 1e-9; ago += step) {
    const label =
      ago === 0
        ? trans.__('now')
        : ago % 60 === 0
          ? trans.__('-%1 min', formatInt(ago / 60))
          : trans.__('-%1 s', formatInt(ago));
    ticks.unshift({ fraction: (span - ago) / span, label });
  }
  return ticks;
}

/** The value holding at time `at` (the last sample at or before it, within `maxHold`), or null: a gap. */
export function valueAt(t: number[], v: (number | null)[], at: number, maxHold: number): number | null {
  let lo = 0;
  let hi = t.length - 1;
  let found = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (t[mid] <= at) {
      found = mid;
      lo = mid + 1;
    } else {
      hi = mid - 1;
    }
  }
  if (found < 0 || at - t[found] > maxHold) {
    return null;
  }
  const value = v[found];
  return isNumber(value) ? value : null;
}

export type SeriesId = 'memory' | 'utilization';

export interface ChartSeries {
  id: SeriesId;
  label: string;
  t: number[];
  /** Percentages; null: a gap. */
  pct: (number | null)[];
  path: string;
  /** The area under the line ("" for a series drawn as a line only). */
  area: string;
}

export interface ChartView {
  key: string;
  start: number;
  end: number;
  maxHold: number;
  series: ChartSeries[];
  ticks: Tick[];
  /** "No samples yet" while the window holds none, else "". */
  empty: string;
  /** The chart's accessible name, with the latest values. */
  summary: string;
  /** The word for a value the samples do not have (the data's `words`, core/words.py). */
  missing: string;
}

/** How long a sample may hold: a few sampling intervals, so one late sample is no gap but a stopped sampler is. */
export function maxHoldOf(intervalS: number): number {
  return Math.max(3 * intervalS, intervalS + 2);
}

function memoryPct(series: KeptSeries, totalMib: number | null): (number | null)[] {
  const total = series.memoryTotalMib ?? totalMib;
  return series.memoryUsedMib.map(used => (isNumber(used) && isNumber(total) && total > 0 ? (used / total) * 100 : null));
}

function pctText(value: number | null, missing: string, trans: Trans): string {
  return value === null ? missing : trans.__('%1%', formatInt(value));
}

/**
 * The chart of one GPU (memory and utilization) or MIG device (memory only: `utilization` false) over the
 * window ending at `end` (the server's time of the last answer). `totalMib` is used where the series has no
 * total of its own. Null when the history has no series of that key and nothing to show.
 */
export function chartView(
  key: string,
  history: KeptHistory,
  end: number,
  options: { utilization: boolean; totalMib?: number | null; windowS?: number; words?: Words | null },
  trans: Trans = plainTrans
): ChartView {
  const missing = missingWord(options.words ?? null, trans);
  const windowS = options.windowS ?? HISTORY_WINDOW_S;
  const scale = { start: end - windowS, end };
  const maxHold = maxHoldOf(history.intervalS);
  const kept = history.series[key];
  const series: ChartSeries[] = [];
  if (kept) {
    const build = (id: SeriesId, label: string, pct: (number | null)[], area: boolean): ChartSeries => {
      const runs = stepRuns(kept.t, pct, scale.start, scale.end, maxHold);
      return { id, label, t: kept.t, pct, path: stepPath(runs, scale), area: area ? stepArea(runs, scale) : '' };
    };
    series.push(build('memory', trans.__('memory used'), memoryPct(kept, options.totalMib ?? null), true));
    if (options.utilization) {
      const util = kept.utilizationPct ?? kept.t.map(() => null);
      series.push(build('utilization', trans.__('utilization'), util, false));
    }
  } else {
    series.push({ id: 'memory', label: trans.__('memory used'), t: [], pct: [], path: '', area: '' });
    if (options.utilization) {
      series.push({ id: 'utilization', label: trans.__('utilization'), t: [], pct: [], path: '', area: '' });
    }
  }
  const empty = series.every(s => !s.path) ? trans.__('No samples yet') : '';
  const latest = series.map(s => `${s.label} ${pctText(valueAt(s.t, s.pct, end, maxHold), missing, trans)}`).join(', ');
  const minutes = formatInt(windowS / 60);
  return {
    key,
    start: scale.start,
    end,
    maxHold,
    series,
    ticks: timeTicks(scale.start, scale.end, trans),
    empty,
    missing,
    summary: options.utilization
      ? trans.__('Memory used and utilization over the last %1 min; now: %2', minutes, latest)
      : trans.__('Memory used over the last %1 min; now: %2', minutes, latest)
  };
}

/**
 * What the hover label says at `fraction` (0 … 1) of the chart's width: the clock time, each series' value
 * ("mem 45% · util 45%"), and both on one line (`text`).
 */
export function hoverAt(
  view: ChartView,
  fraction: number,
  trans: Trans = plainTrans
): { t: number; x: number; time: string; values: string; text: string } {
  const f = Math.min(1, Math.max(0, fraction));
  const t = view.start + f * (view.end - view.start);
  const values = view.series
    .map(s =>
      trans.__(
        '%1 %2',
        s.id === 'memory' ? trans.__('mem') : trans.__('util'),
        pctText(valueAt(s.t, s.pct, t, view.maxHold), view.missing, trans)
      )
    )
    .join(' · ');
  const time = clockTime(t);
  return { t, x: f * CHART_W, time, values, text: `${time} · ${values}` };
}
