// Kernels that died holding GPU memory in the sidebar's model (labextension/src/model/deaths.ts): the answer's
// `dead_kernels` read; the line (notebook, time on this browser's clock, memory, GPUs, cause, restarted) and its
// tooltip; at most 3 lines, newest first, those dismissed in this browser hidden on this and the next page load.
// `node --test labextension/test/`.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import {
  deathLine,
  deathLines,
  deathTime,
  deathTitle,
  DEATHS_DISMISSED_KEY,
  DismissedDeaths,
  formatBytes,
  readDeaths
} from '../../lib/model/deaths.js';

const K1 = '8c1d0f6e-0000-4000-8000-000000000001';
const K2 = '8c1d0f6e-0000-4000-8000-000000000002';
const GIB = 1024 ** 3;
// 14:02:30 on the browser's clock (the tests run in any time zone).
const AT = new Date(2026, 11, 3, 14, 2, 30).getTime() / 1000;
const SIGKILL_CAUSE = "killed by SIGKILL: most often the system's out-of-memory killer (host memory), or someone ended it";

const death = (extra = {}) => ({
  kernel_id: K1,
  notebook: 'work/train.ipynb',
  pid: 4242,
  died_at: AT,
  signal: 9,
  signal_name: 'SIGKILL',
  exit_code: null,
  cause: SIGKILL_CAUSE,
  last_held_bytes: 12 * GIB,
  last_held_mib: 12288,
  gpus: [1],
  held_at: AT - 2,
  restarted: true,
  ...extra
});

function memoryStore(initial = {}) {
  const items = { ...initial };
  return { items, getItem: key => (key in items ? items[key] : null), setItem: (key, value) => (items[key] = String(value)) };
}

test('dead_kernels read from the answer: an older server has none; entries without a kernel or a time left out', () => {
  assert.deepEqual(readDeaths(undefined), []);
  assert.deepEqual(readDeaths({ not: 'a list' }), []);
  const [first, ...rest] = readDeaths([
    death(),
    { kernel_id: K2 },
    { died_at: AT },
    'junk',
    death({ kernel_id: K2, notebook: '', signal: null, signal_name: null, exit_code: 3, last_held_bytes: 'x', gpus: [0, 'x'], restarted: 'yes' })
  ]);
  assert.deepEqual(first, {
    kernelId: K1,
    notebook: 'work/train.ipynb',
    pid: 4242,
    diedAt: AT,
    signal: 9,
    signalName: 'SIGKILL',
    exitCode: null,
    cause: SIGKILL_CAUSE,
    heldBytes: 12 * GIB,
    gpus: [1],
    heldAt: AT - 2,
    restarted: true
  });
  assert.equal(rest.length, 1);
  assert.deepEqual(
    [rest[0].notebook, rest[0].signal, rest[0].exitCode, rest[0].heldBytes, rest[0].gpus, rest[0].restarted],
    [null, null, 3, null, [0], false]
  );
});

test('the line: which notebook, when, what it held on which GPU, the cause, and whether it was restarted', () => {
  const [killed] = readDeaths([death()]);
  assert.equal(
    deathLine(killed, undefined, AT + 60),
    "train.ipynb's kernel died at 14:02 holding 12.0 GiB on GPU 1. Killed by SIGKILL: most often the system's " +
      'out-of-memory killer (host memory), or someone ended it. It was restarted: its variables are gone.'
  );
  const [crashed] = readDeaths([
    death({
      kernel_id: K2,
      notebook: null,
      signal: 11,
      signal_name: 'SIGSEGV',
      cause: 'crashed (SIGSEGV): a fault in native code',
      last_held_bytes: 512 * 1024 ** 2 + 5,
      gpus: [0, 2],
      restarted: false
    })
  ]);
  assert.equal(
    deathLine(crashed, undefined, AT),
    'Kernel 8c1d0f6e died at 14:02 holding 512 MiB on GPU 0, GPU 2. Crashed (SIGSEGV): a fault in native code. ' +
      'It was not restarted.'
  );
  const [unsaid] = readDeaths([death({ last_held_bytes: null, gpus: [], cause: '' })]);
  assert.equal(deathLine(unsaid, undefined, AT), "train.ipynb's kernel died at 14:02 holding GPU memory. It was restarted: its variables are gone.");
});

test('the time is the clock alone that day, with the date on another', () => {
  assert.equal(deathTime(AT, AT + 3600), '14:02');
  assert.equal(deathTime(AT, AT + 2 * 86400), '2026-12-03 14:02');
});

test('sizes: GiB with one decimal from 1 GiB up, MiB below', () => {
  assert.equal(formatBytes(12 * GIB), '12.0 GiB');
  assert.equal(formatBytes(4096 * 1024 ** 2 + 123), '4.0 GiB');
  assert.equal(formatBytes(512 * 1024 ** 2), '512 MiB');
  assert.equal(formatBytes(1536 * 1024), '1.5 MiB');
});

test('the tooltip: the path, the process, the signal or exit code and the exact bytes', () => {
  const [killed, exited] = readDeaths([death(), death({ signal: null, signal_name: null, exit_code: 1, pid: null })]);
  assert.equal(deathTitle(killed), 'work/train.ipynb · process 4242 · ended by signal 9 (SIGKILL) · held 12,884,901,888 bytes');
  assert.equal(deathTitle(exited), 'work/train.ipynb · exit code 1 · held 12,884,901,888 bytes');
});

test('every sentence goes through the translation', () => {
  const seen = [];
  const trans = {
    __: (msgid, ...args) => {
      seen.push(msgid);
      return `<${msgid}>`;
    },
    _n: msgid => msgid
  };
  const [killed] = readDeaths([death()]);
  deathLine(killed, trans, AT);
  deathTitle(killed, trans);
  assert.ok(seen.includes("%1's kernel died at %2 holding %3 on %4."), seen);
  assert.ok(seen.includes('It was restarted: its variables are gone.'), seen);
  assert.ok(seen.includes('%1 GiB') && seen.includes('GPU %1'), seen);
});

test('lines: newest first, at most 3, those dismissed here hidden on this and the next page load', () => {
  const deaths = readDeaths([100, 400, 200, 300].map((t, i) => death({ kernel_id: `k${i}`, died_at: t })));
  const store = memoryStore();
  const dismissed = new DismissedDeaths(store);
  assert.deepEqual(deathLines(deaths, dismissed).map(d => d.diedAt), [400, 300, 200]);
  dismissed.dismiss(deaths[1]);
  assert.deepEqual(deathLines(deaths, dismissed).map(d => d.diedAt), [300, 200, 100]);
  // The next page load reads what this one kept; the culler's dismissed lines are kept apart.
  assert.ok(store.items[DEATHS_DISMISSED_KEY].includes('k1@400'));
  assert.deepEqual(deathLines(deaths, new DismissedDeaths(store)).map(d => d.diedAt), [300, 200, 100]);
  // The same kernel dying again later is a new line.
  const again = readDeaths([death({ kernel_id: 'k1', died_at: 900 })]);
  assert.deepEqual(deathLines(again, new DismissedDeaths(store)).map(d => d.diedAt), [900]);
  // No storage (a sandboxed frame): dismissed for this page only.
  const none = new DismissedDeaths(null);
  none.dismiss(deaths[0]);
  assert.deepEqual(deathLines(deaths, none).map(d => d.diedAt), [400, 300, 200]);
});
