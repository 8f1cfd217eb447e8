/**
 * "Shut down kernel" from a GPU row: a JupyterLab dialog that names the notebook and the GPU memory it
 * frees, Cancel first (the default: Enter does not shut anything down) and a destructive "Shut down".
 */
import { Dialog, showDialog } from '@jupyterlab/apputils';
import type { TranslationBundle } from '@jupyterlab/translation';
import { Widget } from '@lumino/widgets';

import type { ShutdownPlan } from './model';
import { el } from './render';

/** The dialog's body: plain text nodes only (the notebook's path is the user's text, not markup). */
function shutdownBody(plan: ShutdownPlan, trans: TranslationBundle): Widget {
  const body = new Widget();
  body.addClass('tfgpu-shutdown-dialog');
  body.node.appendChild(el('p', 'tfgpu-shutdown-question', trans.__('Shut down the kernel of %1?', plan.name)));
  if (plan.frees) {
    body.node.appendChild(el('p', 'tfgpu-shutdown-frees', trans.__('This frees %1.', plan.frees)));
  }
  body.node.appendChild(
    el(
      'p',
      'tfgpu-shutdown-note',
      trans.__("The kernel's variables are lost; the notebook's file is not changed.")
    )
  );
  return body;
}

/** Ask; true when the user confirmed. */
export async function confirmShutdown(plan: ShutdownPlan, trans: TranslationBundle): Promise<boolean> {
  const result = await showDialog({
    title: trans.__('Shut down kernel?'),
    body: shutdownBody(plan, trans),
    buttons: [
      Dialog.cancelButton({ label: trans.__('Cancel'), className: 'tfgpu-shutdown-cancel' }),
      Dialog.warnButton({ label: trans.__('Shut down'), className: 'tfgpu-shutdown-confirm tfgpu-danger' })
    ],
    defaultButton: 0
  });
  return result.button.accept;
}
