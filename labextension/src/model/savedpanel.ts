/**
 * tfgpu's live panel saved in a notebook: its output holds the widget view and, for where the widget cannot be
 * drawn, the panel's own text (text/plain, and text/html marked `tfgpu-panel-fallback`; ipython/panel.py).
 */

const WIDGET_VIEW = 'application/vnd.jupyter.widget-view+json';
const FALLBACK_MARK = 'tfgpu-panel-fallback';

/** The panel's text for where it cannot be drawn, when `data` (an output's mime bundle) is a tfgpu panel; else null. */
export function panelFallbackText(data: unknown): string | null {
  if (typeof data !== 'object' || data === null) {
    return null;
  }
  const bundle = data as { [mime: string]: unknown };
  const html = bundle['text/html'];
  const text = bundle['text/plain'];
  if (bundle[WIDGET_VIEW] === undefined || typeof html !== 'string' || !html.includes(FALLBACK_MARK)) {
    return null;
  }
  return typeof text === 'string' && text.trim() ? text.trim() : null;
}

/** Whether a node's own text is ipywidgets' "Error displaying widget..." (the model behind the view is gone). */
export function isWidgetError(text: string | null | undefined): boolean {
  return typeof text === 'string' && text.startsWith('Error displaying widget');
}
