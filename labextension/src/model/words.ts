/**
 * The words for a setting's state, TensorFlow's state and a missing value, as the data carries them: the comm's
 * `state` message and the server's GET tfgpu/api/gpus answer both have `words` (tfgpu_magic/core/words.py
 * `to_dict()`), so the sidebar calls a state what the kernel's own views call it. This file keeps no copy of
 * those words: without them (an older kernel or server) a key reads as itself, "no_gpu" as "no gpu".
 */

/** `words` of the data, read (see `readWords`). */
export interface Words {
  /** A setting's status key ("pending") -> its words ("waiting for import") and level ("info"). */
  settingStates: { [key: string]: { words: string; level: string } };
  /** TensorFlow's state key ("not_imported") -> its words. */
  tfStates: { [key: string]: string };
  /** The word for a value that could not be read ("n/a"). */
  missing: string;
  /** Why NVML gave no value, by its key ("no_permission" -> "no permission"). */
  missingReasons: { [key: string]: string };
  /** The word for a GPU's or a process's name that could not be read. */
  noName: string;
}

function stringMap(raw: unknown): { [key: string]: string } {
  const out: { [key: string]: string } = {};
  if (typeof raw === 'object' && raw !== null && !Array.isArray(raw)) {
    for (const [key, value] of Object.entries(raw)) {
      if (typeof value === 'string' && value) {
        out[key] = value;
      }
    }
  }
  return out;
}

/** The data's `words` (null: none there, or not of that shape). */
export function readWords(raw: unknown): Words | null {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    return null;
  }
  const r = raw as { [key: string]: unknown };
  const settingStates: Words['settingStates'] = {};
  if (typeof r.setting_states === 'object' && r.setting_states !== null) {
    for (const [key, value] of Object.entries(r.setting_states)) {
      const v = value as { words?: unknown; level?: unknown } | null;
      if (v && typeof v.words === 'string' && v.words) {
        settingStates[key] = { words: v.words, level: typeof v.level === 'string' ? v.level : 'info' };
      }
    }
  }
  return {
    settingStates,
    tfStates: stringMap(r.tf_states),
    missing: typeof r.missing === 'string' && r.missing ? r.missing : '',
    missingReasons: stringMap(r.missing_reasons),
    noName: typeof r.no_name === 'string' && r.no_name ? r.no_name : ''
  };
}

/** A key as words when the data names it not: "no_permission" -> "no permission". */
export function keyWords(key: string): string {
  return key.replace(/_/g, ' ');
}
