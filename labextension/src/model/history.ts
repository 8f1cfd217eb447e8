/**
 * The GPUs' recent past, as the sidebar keeps it: the server samples every GPU (and MIG device) all along;
 * the sidebar asks for the whole window once (`?history=600`), then only for samples newer than the last it
 * has (`&since=T`), merges them in, and drops what fell out of the window.
 */

import { isNumber } from './format.js';

/** The sidebar's chart window: the last 10 minutes. */
export const HISTORY_WINDOW_S = 600;

/** One GPU's (or MIG device's) samples, ascending in time; null values are samples that could not be read. */
export interface KeptSeries {
  t: number[];
  memoryUsedMib: (number | null)[];
  /** null for a MIG device: NVML reports no utilization per MIG device. */
  utilizationPct: (number | null)[] | null;
  memoryTotalMib: number | null;
}

export interface KeptHistory {
  intervalS: number;
  sampling: boolean;
  /** Why there is no history (NVML unavailable ...), or "". */
  note: string;
  /** By the document's key: "0", "1" ... for GPUs, "MIG-<uuid>" for MIG devices. */
  series: Record<string, KeptSeries>;
  /** The newest sample's time over every series (the next request's `since`), or null before any. */
  latest: number | null;
}

const DEFAULT_INTERVAL_S = 2;

function valuesOf(raw: unknown, length: number): (number | null)[] | null {
  if (!Array.isArray(raw) || raw.length !== length) {
    return null;
  }
  return raw.map(v => (isNumber(v) ? v : null));
}

/** One series of the server's `history.gpus`, checked; null when its arrays do not line up. */
function readSeries(raw: unknown): KeptSeries | null {
  if (typeof raw !== 'object' || raw === null) {
    return null;
  }
  const r = raw as Record<string, unknown>;
  if (!Array.isArray(r.t) || !r.t.every(isNumber)) {
    return null;
  }
  const t = r.t as number[];
  const memory = valuesOf(r.memory_used_mib, t.length);
  if (memory === null) {
    return null;
  }
  const utilization = r.utilization_gpu_pct === null ? null : valuesOf(r.utilization_gpu_pct, t.length);
  return {
    t,
    memoryUsedMib: memory,
    utilizationPct: utilization,
    memoryTotalMib: isNumber(r.memory_total_mib) ? r.memory_total_mib : null
  };
}

/** `kept` with `incoming`'s samples newer than its last appended (a sample already kept is never doubled). */
function appendSeries(kept: KeptSeries | undefined, incoming: KeptSeries): KeptSeries {
  if (!kept) {
    return incoming;
  }
  const last = kept.t.length ? kept.t[kept.t.length - 1] : -Infinity;
  const from = incoming.t.findIndex(t => t > last);
  const newer = from < 0 ? incoming.t.length : from;
  const keptUtil = kept.utilizationPct;
  const inUtil = incoming.utilizationPct;
  return {
    t: kept.t.concat(incoming.t.slice(newer)),
    memoryUsedMib: kept.memoryUsedMib.concat(incoming.memoryUsedMib.slice(newer)),
    // A series is utilization-less (a MIG device) only if the server says so; a mix keeps a gap for the unknown.
    utilizationPct:
      keptUtil === null && inUtil === null
        ? null
        : (keptUtil ?? kept.t.map(() => null)).concat((inUtil ?? incoming.t.map(() => null)).slice(newer)),
    memoryTotalMib: incoming.memoryTotalMib ?? kept.memoryTotalMib
  };
}

/** Drop the samples before `cutoff`, keeping the last one before it: its value holds into the window. */
function trimSeries(series: KeptSeries, cutoff: number): KeptSeries {
  let first = 0;
  while (first + 1 < series.t.length && series.t[first + 1] <= cutoff) {
    first += 1;
  }
  if (first === 0) {
    return series;
  }
  return {
    t: series.t.slice(first),
    memoryUsedMib: series.memoryUsedMib.slice(first),
    utilizationPct: series.utilizationPct === null ? null : series.utilizationPct.slice(first),
    memoryTotalMib: series.memoryTotalMib
  };
}

/**
 * Merge the `history` of a GET tfgpu/api/gpus answer into what the sidebar keeps. `now` is the server's time
 * of the answer (its `taken_at`, unix seconds); samples older than the window before it are dropped. An answer
 * without history (an older server, or a request that did not ask) leaves nothing kept: null.
 */
export function mergeHistory(
  kept: KeptHistory | null,
  history: unknown,
  now: number | null,
  windowS: number = HISTORY_WINDOW_S
): KeptHistory | null {
  if (typeof history !== 'object' || history === null) {
    return null;
  }
  const h = history as Record<string, unknown>;
  const intervalS = isNumber(h.interval_s) && h.interval_s > 0 ? h.interval_s : DEFAULT_INTERVAL_S;
  const series: Record<string, KeptSeries> = { ...(kept?.series ?? {}) };
  const incoming = typeof h.gpus === 'object' && h.gpus !== null ? (h.gpus as Record<string, unknown>) : {};
  for (const [key, raw] of Object.entries(incoming)) {
    const read = readSeries(raw);
    if (read !== null) {
      series[key] = appendSeries(series[key], read);
    }
  }
  let latest: number | null = null;
  for (const s of Object.values(series)) {
    if (s.t.length) {
      latest = Math.max(latest ?? -Infinity, s.t[s.t.length - 1]);
    }
  }
  const end = Math.max(isNumber(now) ? now : -Infinity, latest ?? -Infinity);
  if (Number.isFinite(end)) {
    for (const [key, s] of Object.entries(series)) {
      const trimmed = trimSeries(s, end - windowS);
      // A GPU gone from the server (its last sample before the window) leaves the chart with its samples.
      if (!trimmed.t.length || trimmed.t[trimmed.t.length - 1] < end - windowS) {
        delete series[key];
      } else {
        series[key] = trimmed;
      }
    }
  }
  return {
    intervalS,
    sampling: h.sampling !== false,
    note: typeof h.note === 'string' ? h.note : '',
    series,
    latest
  };
}

/**
 * The query of the next request: the whole window while nothing is kept, then only what is newer than the
 * last sample kept.
 */
export function historyQuery(kept: KeptHistory | null, windowS: number = HISTORY_WINDOW_S): Record<string, string> {
  const query: Record<string, string> = { history: String(windowS) };
  if (kept && kept.latest !== null) {
    query.since = String(kept.latest);
  }
  return query;
}
