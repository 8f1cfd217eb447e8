/**
 * "Restart kernel and apply": what the dialog lists before anything is saved (each value to save and apply,
 * the values left out with the kernel's reason, a mark on values nobody could check), the notice a refusal at
 * kernel start raises, and the apply verdict brought up to date with the kernel's own record (a "waiting for
 * import" that TensorFlow's import has settled since).
 *
 * Values the kernel refuses are left out, not saved with a mark: a kernel start refuses the whole document for
 * one bad value, so saving it would lose every good one at the next start. Values only taken as given (NVML
 * cannot list the GPUs: `visible 9` with no driver) are saved, marked: a start takes them the same way, and
 * on such a machine they may well be right.
 */

import { plainTrans, Trans } from './format.js';
import type { Sections } from './notebook.js';
import { isPlainObject, SavedSettings, settingLines } from './saved.js';
import type { ApplyOutcome, ApplyState, Validated } from './apply.js';

/** One value the dialog names: its `%tfgpu` argument line ("visible 1") and why it is marked or left out. */
export interface RestartLine {
  setting: string;
  text: string;
  reason: string;
}

/**
 * What "Restart kernel and apply" saves and applies (`settings`, one `kept` line per value, `reason` set on
 * those not checked against the GPUs), what it leaves out (`leftOut`, each with the kernel's reason), and a
 * note said once for the whole (`note`: nothing could be checked, and why; "" when the kernel checked them).
 */
export interface RestartPlan {
  settings: SavedSettings;
  kept: RestartLine[];
  leftOut: RestartLine[];
  note: string;
}

/** A kernel message without its "tfgpu: " prefix: the dialog says whose words they are. */
function reasonOf(message: string): string {
  return message.replace(/^tfgpu:\s*/, '').trim();
}

/**
 * Split the settings by the kernel's check (`answer`: its `validate` reply; null: it could not be asked, and
 * `notChecked` says why).
 */
export function restartPlan(
  settings: SavedSettings,
  answer: Validated | null,
  notChecked: string,
  trans: Trans = plainTrans
): RestartPlan {
  const kept: RestartLine[] = [];
  const leftOut: RestartLine[] = [];
  const out: SavedSettings = {};
  const whole = answer?.errors[''];
  for (const [setting, value] of Object.entries(settings)) {
    const lines = settingLines({ [setting]: value });
    const refused = whole ?? answer?.errors[setting];
    if (refused) {
      // One reason per setting: a per-GPU list's lines share the message that names the bad one.
      leftOut.push({ setting, text: lines.join('; '), reason: reasonOf(refused) });
      continue;
    }
    out[setting] = value;
    const unchecked = answer?.unchecked?.[setting] ?? '';
    for (const text of lines) {
      kept.push({ setting, text, reason: unchecked ? reasonOf(unchecked) : '' });
    }
  }
  const note = answer ? '' : notChecked || trans.__('the kernel could not check these values');
  return { settings: out, kept, leftOut, note };
}

/**
 * The notice a refusal at kernel start raises beside the sidebar's verdict (null: nothing to raise). Only a
 * start's apply: the user's own buttons show their answer in the sidebar they pressed them in; "this kernel
 * ran cells already" is not a refusal.
 */
export function startRefusalNotice(
  state: ApplyState | null,
  notebook: string,
  trans: Trans = plainTrans
): { text: string; level: 'error' | 'warning' } | null {
  if (state?.kind === 'skipped') {
    return { text: trans.__('%1: saved GPU settings not applied at kernel start: %2', notebook, state.message), level: 'warning' };
  }
  if (state?.kind !== 'done' || state.consented || state.cancelled) {
    return null;
  }
  const reply = state.reply;
  if (reply.kind === 'result') {
    if (reply.ok || reply.reason === 'ran_cells') {
      return null;
    }
    const why = reasonOf(reply.message ?? trans.__('no reason given'));
    return reply.outcomes.length
      ? { text: trans.__('%1: saved GPU settings partly refused at kernel start: %2', notebook, why), level: 'error' }
      : { text: trans.__('%1: saved GPU settings refused at kernel start: %2', notebook, why), level: 'error' };
  }
  if (reply.kind === 'not-installed') {
    return {
      text: trans.__("%1: saved GPU settings not applied: tfgpu_magic is not installed in the kernel's environment", notebook),
      level: 'error'
    };
  }
  if (reply.kind === 'error') {
    return { text: trans.__('%1: applying the saved GPU settings failed: %2', notebook, reply.message), level: 'error' };
  }
  return null;
}

/**
 * The apply's outcomes with each one that was waiting for `import tensorflow` replaced by the kernel's current
 * record of it (its comm's `kernel.settings` rows), so the verdict does not keep saying "waiting for import"
 * after the import. Rows name a per-GPU value `limit[1]` with the argument alone; outcomes carry `--gpu 1`.
 */
export function freshOutcomes(outcomes: ApplyOutcome[], kernel: Sections | null | undefined): ApplyOutcome[] {
  const rows: unknown[] = kernel && Array.isArray(kernel.settings) ? kernel.settings : [];
  const now = new Map<string, ApplyOutcome>();
  for (const row of rows.filter(isPlainObject)) {
    if (typeof row.setting !== 'string' || typeof row.asked !== 'string' || typeof row.status !== 'string') {
      continue;
    }
    const [name, gpu] = row.setting.replace(/\]$/, '').split('[');
    const asked = gpu && gpu !== 'all' ? `${row.asked} --gpu ${gpu}` : row.asked;
    const detail = typeof row.detail === 'string' ? row.detail : '';
    now.set(`${name} ${asked}`, { setting: name, asked, status: row.status, detail });
  }
  return outcomes.map(o => {
    const current = o.status === 'pending' ? now.get(`${o.setting} ${o.asked}`) : undefined;
    return current ?? o;
  });
}
