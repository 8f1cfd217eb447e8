/**
 * The words for a setting's state, TensorFlow's state and a missing value, as the data carries them: the comm's
 * `state` message and the server's GET tfgpu/api/gpus answer both have `words` (tfgpu_magic/core/words.py
 * `to_dict()`), so the sidebar calls a state what the kernel's own views call it. This file keeps no copy of
 * those words: without them (an older kernel or server) a key reads as itself, "no_gpu" as "no gpu".
 *
 * Both also carry `setting_words` (tfgpu_magic/core/settings `wire_words()`): the settings a notebook can save,
 * in the order a kernel applies them. The sidebar keeps no list of setting names either.
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

/** One setting a notebook can save, as the registry names it (an element of the data's `setting_words`). */
export interface SettingWord {
  /** What follows `%tfgpu` in the setting's lines. */
  name: string;
  /** It may hold one value per GPU: a list of `%tfgpu` argument texts, each with its `--gpu I`. */
  perGpu: boolean;
  /** What the editor's empty input shows: the values it takes ("40% / 2GB"). */
  placeholder: string;
}

/** The settings a notebook can save, in the order a kernel applies them. */
export type SettingWords = readonly SettingWord[];

/**
 * A name goes into `%tfgpu <name> <value>` lines and element ids: one word of lower-case letters, digits and
 * underscores, whatever the data says.
 */
const SETTING_NAME = /^[a-z][a-z0-9_]*$/;

/**
 * The data's `setting_words`, read (null: none there, an older kernel or server). Entries of another shape, and a
 * name given twice, are left out; keys this sidebar does not know are ignored (the registry may add some).
 */
export function readSettingWords(raw: unknown): SettingWords | null {
  if (!Array.isArray(raw)) {
    return null;
  }
  const out: SettingWord[] = [];
  for (const entry of raw) {
    if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) {
      continue;
    }
    const { name, per_gpu: perGpu, placeholder } = entry as { [key: string]: unknown };
    if (typeof name !== 'string' || !SETTING_NAME.test(name) || out.some(word => word.name === name)) {
      continue;
    }
    out.push({ name, perGpu: perGpu === true, placeholder: typeof placeholder === 'string' ? placeholder : '' });
  }
  return out.length ? out : null;
}

/** The registry's word for the setting `name` (undefined: no such setting). */
export function settingWord(words: SettingWords, name: string): SettingWord | undefined {
  return words.find(word => word.name === name);
}

/** Whether two readings name the same settings alike (the editor is then left as it is). */
export function sameSettingWords(a: SettingWords | null, b: SettingWords | null): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/**
 * The setting words the page goes by: the server's, the same for every notebook and every part of the page (the
 * start's apply reads them too, before any kernel has a comm); else the front kernel's, where the server names
 * none (an older server, or its extension off).
 */
export function pageSettingWords(
  server: SettingWords | null,
  kernel: SettingWords | null | undefined
): SettingWords | null {
  return server ?? kernel ?? null;
}
