/**
 * A GPU chart's figures as text, for those who cannot see or hover the chart: a summary (the figures now and the
 * peaks over the window) and a table of the values the chart draws at each step back from now, the same values
 * its hover label says at those points (valueAt with the chart's maxHold).
 */

import { clockTime, formatInt, formatMiB, isNumber, plainTrans, Trans } from './format.js';
import { KeptSeries } from './history.js';
import { ChartView, valueAt } from './chart.js';

export interface ChartFigureRow {
  /** "-5 min", "now". */
  ago: string;
  /** The clock time of that moment, "14:03:09". */
  time: string;
  /** "30,000 MiB (73%)", or "73%" without the MiB figures; the missing word where the chart has a gap. */
  memory: string;
  /** null for a chart without utilization (a MIG device). */
  utilization: string | null;
}

export interface ChartFigures {
  /** "GPU 0: memory used 30,000 MiB (73%) now, peak 30,000 MiB (73%) in the last 10 min; utilization ...". */
  summary: string;
  /** The table's column heads: time, memory used and (where drawn) utilization. */
  columns: string[];
  /** Oldest first, "now" last. */
  rows: ChartFigureRow[];
}

/** Between the table's rows: a minute, or a tenth of a longer window in whole minutes. */
export function figureStepS(windowS: number): number {
  return Math.max(60, Math.round(windowS / 10 / 60) * 60);
}

function memoryText(
  pct: number | null,
  mib: number | null,
  missing: string,
  trans: Trans
): string {
  if (pct === null) {
    return missing;
  }
  const percent = trans.__('%1%', formatInt(pct));
  return mib === null ? percent : trans.__('%1 (%2)', formatMiB(mib, trans), percent);
}

/** The highest value among the samples drawn in [start, end] (the one holding at start included); null: none. */
function peakIndex(t: number[], v: (number | null)[], start: number, end: number, maxHold: number): number | null {
  let best: number | null = null;
  for (let i = 0; i < t.length; i++) {
    const value = v[i];
    const next = i + 1 < t.length ? t[i + 1] : end;
    const drawnUntil = Math.min(next, t[i] + maxHold, end);
    if (!isNumber(value) || t[i] > end || drawnUntil <= start) {
      continue;
    }
    if (best === null || value > (v[best] as number)) {
      best = i;
    }
  }
  return best;
}

/**
 * The figures of `view` (chartView's answer for `kept`, the history's series of that key) for the device named
 * `device` ("GPU 0"). `kept` gives the MiB figures; without it the table says percentages only.
 */
export function chartFigures(
  view: ChartView,
  kept: KeptSeries | undefined,
  device: string,
  trans: Trans = plainTrans
): ChartFigures {
  const memory = view.series.find(s => s.id === 'memory');
  const utilization = view.series.find(s => s.id === 'utilization') ?? null;
  const mibs = kept && kept.memoryUsedMib.length === memory?.t.length ? kept.memoryUsedMib : null;
  const windowS = view.end - view.start;
  const memoryAt = (at: number): string => {
    if (!memory) {
      return view.missing;
    }
    const pct = valueAt(memory.t, memory.pct, at, view.maxHold);
    const mib = mibs && pct !== null ? valueAt(memory.t, mibs, at, view.maxHold) : null;
    return memoryText(pct, mib, view.missing, trans);
  };
  const utilAt = (at: number): string | null => {
    if (!utilization) {
      return null;
    }
    const pct = valueAt(utilization.t, utilization.pct, at, view.maxHold);
    return pct === null ? view.missing : trans.__('%1%', formatInt(pct));
  };

  const rows: ChartFigureRow[] = [];
  const step = figureStepS(windowS);
  for (let ago = Math.floor(windowS / step) * step; ago >= 0; ago -= step) {
    const at = view.end - ago;
    rows.push({
      ago: ago === 0 ? trans.__('now') : trans.__('-%1 min', formatInt(ago / 60)),
      time: clockTime(at),
      memory: memoryAt(at),
      utilization: utilAt(at)
    });
  }

  const columns = [trans.__('Time'), trans.__('Memory used')];
  if (utilization) {
    columns.push(trans.__('Utilization'));
  }
  const minutes = formatInt(windowS / 60);
  let summary: string;
  if (view.empty) {
    summary = trans.__('%1: %2', device, view.empty);
  } else {
    const peakOf = (t: number[], v: (number | null)[]): number | null =>
      peakIndex(t, v, view.start, view.end, view.maxHold);
    const memoryPeak = memory ? peakOf(memory.t, memory.pct) : null;
    const memoryPeakText =
      memory && memoryPeak !== null
        ? memoryText(memory.pct[memoryPeak], mibs ? mibs[memoryPeak] ?? null : null, view.missing, trans)
        : view.missing;
    summary = trans.__(
      '%1: memory used %2 now, peak %3 in the last %4 min',
      device,
      memoryAt(view.end),
      memoryPeakText,
      minutes
    );
    if (utilization) {
      const utilPeak = peakOf(utilization.t, utilization.pct);
      const utilPeakText =
        utilPeak !== null ? trans.__('%1%', formatInt(utilization.pct[utilPeak] as number)) : view.missing;
      summary = trans.__('%1; utilization %2 now, peak %3', summary, utilAt(view.end), utilPeakText);
    }
  }
  return { summary, columns, rows };
}
