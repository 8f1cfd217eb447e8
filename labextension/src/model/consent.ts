/**
 * Whether a notebook's saved settings may apply at its kernel start without asking: only when this user agreed
 * to those settings for that notebook (the sidebar's "Apply saved settings"), or wrote them through the sidebar
 * (Check & save, Restart kernel and apply). The server keeps that fact, for the user (POST tfgpu/api/consent,
 * tfgpu_magic/core/consent.py): the notebook cannot carry it, and every workspace of the user reads the same.
 *
 * JupyterLab's trust in a notebook is not consent: the server signs, at every save, a notebook whose code cells
 * have no rich output (nbformat's `check_cells`), so a received notebook of code without outputs is "trusted" as
 * soon as it is saved, autosave included. An answer kept in the workspace is not either: another workspace, or
 * `/lab?reset`, starts without it.
 */

import { plainTrans, Trans } from './format.js';
import { canonicalSettings, isPlainObject, SavedDocument, SavedSettings, settingLines } from './saved.js';

/**
 * What the saved settings are, for comparing them with those agreed to (the page's own memory of the server's
 * answers): the version and the settings as the server's digest reads them (`canonicalSettings`), so the page
 * and the server tell the same settings apart. `apply_on_start` is left out: turning it off and on again applies
 * the same settings.
 */
export function settingsKey(saved: SavedDocument): string {
  return JSON.stringify([saved.version, canonicalSettings(saved.settings)]);
}

/** The body of POST tfgpu/api/consent: the notebook's path, its saved settings, and whether to record agreement. */
export function consentRequest(
  path: string,
  saved: SavedDocument,
  agree: boolean
): { path: string; settings: SavedSettings; agree: boolean } {
  return { path, settings: saved.settings, agree };
}

/** The server's answer: agreed only when it says exactly so (anything else, an error among them: ask). */
export function readConsentAnswer(raw: unknown): boolean {
  return isPlainObject(raw) && raw.agreed === true;
}

/**
 * The "Saved settings" section's box while the settings wait for the user: the sentence, the note under the
 * button, the button's label and its tooltip.
 */
export function consentView(
  settings: SavedSettings,
  trans: Trans = plainTrans
): { text: string; note: string; button: string; title: string } {
  const list = settingLines(settings).join(', ') || trans.__('none');
  return {
    text: trans.__('Not applied: you have not agreed to this notebook’s saved settings (%1).', list),
    note: trans.__(
      'A notebook from elsewhere can carry any settings. Apply saved settings applies them in this kernel now and remembers your answer on this server, in every workspace: this notebook’s next kernel starts apply them without asking, until its saved settings change.'
    ),
    button: trans.__('Apply saved settings'),
    title: trans.__('Apply the saved settings in the running kernel, and at every start of this notebook’s kernel from now on')
  };
}
