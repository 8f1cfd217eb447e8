/**
 * The sidebar's pure model: it turns the server's GET tfgpu/api/gpus answer and the kernel comm's
 * messages into the rows the sidebar shows. It imports nothing but constants.ts (no JupyterLab, no DOM),
 * so `node --test` runs it as is; the widget code only renders what these functions return.
 *
 * Every sentence passes through a `Trans` (JupyterLab's TranslationBundle has this shape), so a
 * language pack translates the sidebar; the tests use `plainTrans`, which only fills placeholders.
 *
 * The files, each importing only those above it:
 * - words.ts: the data's words for states and missing values (the comm's and the server's `words`), and the
 *   settings a notebook can save (their `setting_words`: no setting is named in this code);
 * - format.ts: translation, "not available" values, numbers, sizes, durations and times as text;
 * - culler.ts: the GPU-aware idle culler (kernels' activity, warnings and their notifications, released kernels,
 *   the idle polling interval, the kernel's pause);
 * - processes.ts: a GPU's processes as rows (by notebook, idle time, shut-down eligibility, ownership);
 * - mig.ts: MIG devices as rows under their GPU;
 * - gpus.ts: the server's answer (GET tfgpu/api/gpus) as GPU rows, and what shutting a kernel down frees;
 * - history.ts: the GPUs' recent samples, merged from answer to answer;
 * - feed.ts: the server's answer as the page keeps it, and who needs it (the sidebar's and the status bar's one feed);
 * - chart.ts: a GPU's chart as geometry (steps with gaps, ticks, the values under the pointer);
 * - notebook.ts: the kernel comm ("This notebook");
 * - saved.ts: the saved settings (the notebook's `tfgpu` metadata);
 * - consent.ts: whether they apply without asking (notebook trust, the user's remembered answers);
 * - apply.ts: applying them at kernel start, and the kernel's refusals and other messages;
 * - restart.ts: what "Restart kernel and apply" saves, leaves out and marks; a start's refusal as a notice;
 * - requests.ts: requests to the kernel that wait for their answer, sent again until it comes;
 * - statusbar.ts: the status-bar item's text;
 * - chartfigures.ts: a chart's figures as text (a summary and a table) for the keyboard and screen readers;
 * - savedpanel.ts: a live panel saved in a notebook (its own text, for where it cannot be drawn).
 */

export * from './words.js';
export * from './requests.js';
export * from './format.js';
export * from './culler.js';
export * from './processes.js';
export * from './mig.js';
export * from './gpus.js';
export * from './history.js';
export * from './feed.js';
export * from './chart.js';
export * from './chartfigures.js';
export * from './notebook.js';
export * from './saved.js';
export * from './consent.js';
export * from './apply.js';
export * from './restart.js';
export * from './statusbar.js';
export * from './savedpanel.js';
