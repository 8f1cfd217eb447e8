/**
 * A notebook saved with a live panel and opened again: ipywidgets' renderer draws such an output as "Error
 * displaying widget: model not found" (its kernel, and so its model, is gone), and JupyterLab shows no other
 * part of the output. The panel left its own text for that case; this puts it under the error line, so a saved
 * panel says what it was and what to run. Only outputs that are tfgpu panels are touched.
 */
import type { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';

import { isWidgetError, panelFallbackText } from './model';

const NOTE_CLASS = 'tfgpu-saved-panel-note';

/** What this needs of a code cell's output area (@jupyterlab/outputarea's OutputArea has it). */
interface OutputAreaLike {
  widgets: ReadonlyArray<{ node: HTMLElement }>;
  model: { length: number; get(index: number): { data: unknown } };
}

/** Put the panel's own text under each failed tfgpu panel view of this notebook (once each). */
function annotate(panel: NotebookPanel): void {
  for (const cell of panel.content.widgets) {
    if (cell.model.type !== 'code') {
      continue;
    }
    const area = (cell as unknown as { outputArea?: OutputAreaLike }).outputArea;
    if (!area) {
      continue;
    }
    area.widgets.forEach((child, index) => {
      const text = index < area.model.length ? panelFallbackText(area.model.get(index).data) : null;
      if (text === null || child.node.querySelector(`.${NOTE_CLASS}`)) {
        return;
      }
      const failed = Array.from(child.node.querySelectorAll<HTMLElement>('.jupyter-widgets')).find(node =>
        isWidgetError(node.firstChild?.nodeValue)
      );
      if (failed) {
        const note = document.createElement('div');
        note.className = NOTE_CLASS;
        note.setAttribute('role', 'note');
        // `%tfgpu panel` as code, as the panel's own HTML shows it; text only, no markup from the output.
        text.split('`').forEach((part, i) => {
          const piece = i % 2 ? document.createElement('code') : document.createTextNode(part);
          piece.textContent = part;
          note.appendChild(piece);
        });
        failed.appendChild(note); // inside, under its line: the output lays its children out in a row
      }
    });
  }
}

/** Watch one notebook: the renderer writes its error line late (once the widget manager has restored). */
function watch(panel: NotebookPanel): void {
  let scheduled = false;
  const observer = new MutationObserver(records => {
    // Only a node whose text became the renderer's error: streaming output and the rest cost one check each.
    if (scheduled || !records.some(r => r.type === 'childList' && isWidgetError(r.target.firstChild?.nodeValue))) {
      return;
    }
    scheduled = true;
    requestAnimationFrame(() => {
      scheduled = false;
      annotate(panel);
    });
  });
  observer.observe(panel.content.node, { childList: true, subtree: true });
  panel.disposed.connect(() => observer.disconnect());
}

export function watchSavedPanels(tracker: INotebookTracker): void {
  tracker.forEach(watch);
  tracker.widgetAdded.connect((_, panel) => watch(panel));
}
