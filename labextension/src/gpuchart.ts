/**
 * A GPU's chart in the sidebar: the SVG of model/chart.ts's geometry, built once and updated in place, so a
 * new sample moves the lines without rebuilding the node (the pointer's hover line and label stay where they
 * are). Elements are made with createElementNS / createElement and text goes in with textContent only.
 */
import type { TranslationBundle } from '@jupyterlab/translation';

import { CHART_H, CHART_W, ChartFigures, ChartView, hoverAt, SeriesId, Tick, yOf } from './model';
import { el } from './render';

const SVG_NS = 'http://www.w3.org/2000/svg';
/** Between the hover line and its label. */
const HOVER_GAP_PX = 6;

function svg<K extends keyof SVGElementTagNameMap>(
  tag: K,
  className: string,
  attributes: Record<string, string> = {}
): SVGElementTagNameMap[K] {
  const node = document.createElementNS(SVG_NS, tag);
  node.setAttribute('class', className);
  for (const [name, value] of Object.entries(attributes)) {
    node.setAttribute(name, value);
  }
  return node;
}

/** The grid: 0%, 50% and 100%. */
function gridPath(): string {
  return [0, 50, 100].map(pct => `M0 ${yOf(pct)}H${CHART_W}`).join('');
}

export class GpuChart {
  /**
   * `utilization` false: memory only (NVML reports no utilization per MIG device, nor for a GPU in MIG mode);
   * `small`: a MIG device's chart, lower than a GPU's.
   */
  constructor(trans: TranslationBundle, utilization: boolean, small = false) {
    this._trans = trans;
    this.node = el('div', `tfgpu-chart ${small ? 'tfgpu-chart-small' : ''}`.trim());

    const legend = el('div', 'tfgpu-chart-legend');
    const series: [SeriesId, string][] = [['memory', trans.__('memory used')]];
    if (utilization) {
      series.push(['utilization', trans.__('utilization')]);
    }
    for (const [id, label] of series) {
      const item = el('span', `tfgpu-legend-item tfgpu-series-${id}`);
      item.appendChild(el('span', 'tfgpu-legend-swatch'));
      item.appendChild(el('span', 'tfgpu-legend-label', label));
      legend.appendChild(item);
    }
    this.node.appendChild(legend);

    const frame = el('div', 'tfgpu-chart-frame');
    this._plot = el('div', 'tfgpu-chart-plot');
    this._svg = svg('svg', 'tfgpu-chart-svg', {
      viewBox: `0 0 ${CHART_W} ${CHART_H}`,
      preserveAspectRatio: 'none',
      role: 'img'
    });
    this._svg.appendChild(svg('path', 'tfgpu-chart-grid', { d: gridPath() }));
    this._memoryArea = svg('path', 'tfgpu-chart-area tfgpu-series-memory');
    this._svg.appendChild(this._memoryArea);
    for (const [id] of series) {
      const path = svg('path', `tfgpu-chart-line tfgpu-series-${id}`);
      this._lines.set(id, path);
      this._svg.appendChild(path);
    }
    this._cursor = svg('line', 'tfgpu-chart-cursor', { y1: '0', y2: String(CHART_H) });
    this._cursor.style.display = 'none';
    this._svg.appendChild(this._cursor);
    this._plot.appendChild(this._svg);
    this._empty = el('div', 'tfgpu-chart-empty');
    this._plot.appendChild(this._empty);
    this._hover = el('div', 'tfgpu-chart-hover');
    this._hoverTime = el('span', 'tfgpu-chart-hover-time');
    this._hoverValues = el('span', 'tfgpu-chart-hover-values');
    this._hover.append(this._hoverTime, this._hoverValues);
    this._hover.hidden = true;
    // The pointer's label repeats, for a mouse, what the table below says to the keyboard and screen readers.
    this._hover.setAttribute('aria-hidden', 'true');
    this._plot.appendChild(this._hover);
    frame.appendChild(this._plot);
    const yAxis = el('div', 'tfgpu-chart-yaxis');
    yAxis.setAttribute('aria-hidden', 'true');
    yAxis.appendChild(el('span', 'tfgpu-chart-ytop', trans.__('%1%', 100)));
    yAxis.appendChild(el('span', 'tfgpu-chart-ybottom', trans.__('%1%', 0)));
    frame.appendChild(yAxis);
    this.node.appendChild(frame);
    this._xAxis = el('div', 'tfgpu-chart-xaxis');
    this._xAxis.setAttribute('aria-hidden', 'true');
    this.node.appendChild(this._xAxis);

    // The figures as text: a table (caption: the summary) the keyboard reaches through its <summary>.
    const details = el('details', 'tfgpu-chart-details');
    details.appendChild(el('summary', 'tfgpu-chart-details-toggle', trans.__('Figures as a table')));
    const table = el('table', 'tfgpu-table tfgpu-chart-table');
    this._caption = el('caption', 'tfgpu-chart-caption');
    this._tableHead = el('thead');
    this._tableBody = el('tbody');
    table.append(this._caption, this._tableHead, this._tableBody);
    details.appendChild(table);
    this.node.appendChild(details);

    this._plot.addEventListener('mousemove', (event: MouseEvent) => {
      const box = this._plot.getBoundingClientRect();
      this._pointer = box.width > 0 ? (event.clientX - box.left) / box.width : null;
      this._drawHover();
    });
    this._plot.addEventListener('mouseleave', () => {
      this._pointer = null;
      this._drawHover();
    });
  }

  readonly node: HTMLDivElement;

  /**
   * Draw `view`; the hover, if the pointer is on the chart, follows the new samples under it. `figures`: the same
   * as text (the chart's accessible name and its table).
   */
  update(view: ChartView, figures: ChartFigures): void {
    this._view = view;
    this.node.dataset.key = view.key;
    this._svg.setAttribute('aria-label', figures.summary);
    this._drawTable(figures);
    for (const s of view.series) {
      this._lines.get(s.id)?.setAttribute('d', s.path);
      if (s.id === 'memory') {
        this._memoryArea.setAttribute('d', s.area);
      }
    }
    this._empty.textContent = view.empty;
    this._empty.hidden = !view.empty;
    this._drawTicks(view.ticks);
    this._drawHover();
  }

  private _drawTable(figures: ChartFigures): void {
    this._caption.textContent = figures.summary;
    const key = JSON.stringify([figures.columns, figures.rows]);
    if (key === this._tableKey) {
      return;
    }
    this._tableKey = key;
    const head = el('tr');
    for (const column of figures.columns) {
      const th = el('th', '', column);
      th.scope = 'col';
      head.appendChild(th);
    }
    this._tableHead.replaceChildren(head);
    this._tableBody.replaceChildren(
      ...figures.rows.map(row => {
        const tr = el('tr');
        const th = el('th', 'tfgpu-chart-table-time', row.ago, row.time);
        th.scope = 'row';
        tr.appendChild(th);
        tr.appendChild(el('td', 'tfgpu-chart-table-memory', row.memory));
        if (row.utilization !== null) {
          tr.appendChild(el('td', 'tfgpu-chart-table-util', row.utilization));
        }
        return tr;
      })
    );
  }

  private _drawTicks(ticks: Tick[]): void {
    const key = JSON.stringify(ticks);
    if (key === this._ticksKey) {
      return;
    }
    this._ticksKey = key;
    this._xAxis.replaceChildren(
      ...ticks.map(tick => {
        const edge = tick.fraction <= 0 ? 'tfgpu-tick-start' : tick.fraction >= 1 ? 'tfgpu-tick-end' : '';
        const node = el('span', `tfgpu-tick ${edge}`.trim(), tick.label);
        node.style.left = `${(tick.fraction * 100).toFixed(2)}%`;
        return node;
      })
    );
  }

  private _drawHover(): void {
    const view = this._view;
    if (this._pointer === null || view === null) {
      this._cursor.style.display = 'none';
      this._hover.hidden = true;
      return;
    }
    const at = hoverAt(view, this._pointer, this._trans);
    const x = String(Math.round(at.x * 100) / 100);
    this._cursor.setAttribute('x1', x);
    this._cursor.setAttribute('x2', x);
    this._cursor.style.display = '';
    this._hoverTime.textContent = at.time;
    this._hoverValues.textContent = at.values;
    this._hover.setAttribute('aria-label', at.text);
    this._hover.hidden = false;
    // Beside the line, on the side with room, and always inside the plot (a sidebar is narrow).
    const width = this._plot.clientWidth;
    const label = this._hover.offsetWidth;
    const px = Math.min(1, Math.max(0, this._pointer)) * width;
    let left = px + HOVER_GAP_PX;
    if (left + label > width) {
      left = px - HOVER_GAP_PX - label;
    }
    this._hover.style.left = `${Math.round(Math.max(0, Math.min(left, width - label)))}px`;
  }

  private _trans: TranslationBundle;
  private _plot: HTMLDivElement;
  private _svg: SVGSVGElement;
  private _memoryArea: SVGPathElement;
  private _lines = new Map<SeriesId, SVGPathElement>();
  private _cursor: SVGLineElement;
  private _empty: HTMLDivElement;
  private _hover: HTMLDivElement;
  private _hoverTime: HTMLSpanElement;
  private _hoverValues: HTMLSpanElement;
  private _xAxis: HTMLDivElement;
  private _ticksKey = '';
  private _caption: HTMLTableCaptionElement;
  private _tableHead: HTMLTableSectionElement;
  private _tableBody: HTMLTableSectionElement;
  private _tableKey = '';
  private _view: ChartView | null = null;
  /** Where the pointer is, as a fraction of the plot's width; null: not on the chart. */
  private _pointer: number | null = null;
}
