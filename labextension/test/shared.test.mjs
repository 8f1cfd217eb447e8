// Shared GPU servers in the sidebar's model: MIG devices as rows, "Shut down" only on this server's kernels,
// how long a kernel has been idle, another server's process under the same OS user, and a page whose session
// ended (403). Fixture: fixtures/gpus_shared.json (own_processes "server", GPU 0 in MIG mode). `node --test`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

import {
  formatSpan,
  groupByNotebook,
  kernelActivity,
  migLine,
  serverProblem,
  serverTrouble,
  serverUserOf,
  serverView,
  shutdownPlan,
  strfmt,
  withKernels
} from '../../lib/model/index.js';

const shared = JSON.parse(readFileSync(new URL('./fixtures/gpus_shared.json', import.meta.url), 'utf8'));
const KA = 'aaaa1111-0000-4000-8000-000000000001';
const KB = 'bbbb2222-0000-4000-8000-000000000002';
const KC = 'cccc3333-0000-4000-8000-000000000003';

const kernel = (id, sessions, extra = {}) => ({
  id,
  name: 'python3',
  execution_state: 'idle',
  relation: 'kernel',
  sessions,
  idle_s: 30,
  ...extra
});
const nb = path => ({ path, name: path, type: 'notebook' });
const proc = (pid, used, k = null, extra = {}) => ({ pid, used_mib: used, name: 'python', user: 'ann', kernel: k, ...extra });

// -- MIG -----------------------------------------------------------------------------------------------------

test('a GPU in MIG mode lists its MIG devices as rows, and their processes under them, not twice', () => {
  const [a100, h100] = serverView(shared).gpus;
  assert.equal(a100.migLine, 'MIG mode · 2 MIG devices');
  assert.deepEqual(
    a100.mig.map(m => [m.heading.text, m.memory.text, m.historyKey]),
    [
      ['MIG 3g.20gb · slot 0', '1,024 / 19,968 MiB (5%)', 'MIG-5e8b0c1a-2f3d-5a6b-9c7d-0e1f2a3b4c5d'],
      ['MIG 2g.10gb · slot 1', '512 / 9,728 MiB (5%)', 'MIG-9d2c4e6f-7a8b-5c9d-8e0f-1a2b3c4d5e6f']
    ]
  );
  // The parent's processes are the union of its devices': listed under the devices only.
  assert.deepEqual(a100.notebooks, []);
  assert.deepEqual(a100.others, []);
  assert.deepEqual(
    a100.mig[0].notebooks.map(n => n.label),
    ['work/mig.ipynb']
  );
  assert.deepEqual(
    a100.mig[1].others.map(o => o.pid.text),
    ['7777']
  );
  // The heading's tooltip says which instance it is.
  assert.match(a100.mig[0].heading.title, /MIG-5e8b0c1a.*\n.*3g\.20gb\nGPU instance 1, compute instance 0/);
  // The GPU's notes on its processes (the union) would repeat its devices' own: left to the devices.
  const noted = { ...shared.gpus[0], kernel_note: '1 process is not visible', hidden_processes: { count: 1, used_mib: 5 } };
  const parent = serverView({ ...shared, gpus: [noted] }).gpus[0];
  assert.equal(parent.kernelNote, '');
  assert.equal(parent.hidden, null);
  // A GPU without MIG: no line, no rows.
  assert.equal(h100.migLine, null);
  assert.deepEqual(h100.mig, []);
});

test('utilization is not reported per MIG device: n/a or "not reported", never 0', () => {
  const [slot0, slot1] = serverView(shared).gpus[0].mig;
  assert.deepEqual(slot0.utilization, { text: 'n/a', title: 'not reported per MIG device', na: true });
  assert.equal(slot1.utilization.text, 'not reported');
  assert.ok(slot1.utilization.na);
  assert.ok(!JSON.stringify([slot0.utilization, slot1.utilization]).includes('"0%"'));
});

test('MIG mode with no MIG device created says so; MIG off or unsupported says nothing', () => {
  assert.equal(migLine(true, 0), 'MIG mode: no MIG device created yet');
  assert.equal(migLine(true, 1), 'MIG mode · 1 MIG device');
  assert.equal(migLine(false, 0), null);
  assert.equal(migLine(null, 0), null);
  assert.equal(migLine({ unavailable: 'not_supported' }, 0), null);
});

// -- shut down ----------------------------------------------------------------------------------------------

test('"Shut down" only where the kernel itself is on the GPU: not for a child, another process or no kernel', () => {
  const h100 = serverView(shared).gpus[1];
  const byLabel = Object.fromEntries(h100.notebooks.map(n => [n.label, n]));
  assert.deepEqual(byLabel['train.ipynb'].shutdown, { kernelId: KB, name: 'train.ipynb' });
  // The busy kernel (no notebook) has only a child process here; the MIG notebook's child too.
  assert.equal(byLabel.python3.shutdown, null);
  assert.equal(byLabel['work/mig.ipynb'].shutdown, null);
  // Processes of no kernel of this server are other rows: they carry no kernel, so no action.
  assert.ok(h100.others.every(o => !('shutdown' in o)));
  // The MIG device's kernel row is offered.
  assert.deepEqual(serverView(shared).gpus[0].mig[0].notebooks[0].shutdown, { kernelId: KA, name: 'work/mig.ipynb' });
});

test('a kernel without a notebook is named by its kernel name and the start of its id', () => {
  const [row] = groupByNotebook([proc(9, 64, kernel('12345678-aaaa-bbbb', []))]).notebooks;
  assert.deepEqual(row.shutdown, { kernelId: '12345678-aaaa-bbbb', name: 'python3 (kernel 12345678)' });
});

test('the dialog names the memory shutting a kernel down frees, on every GPU and MIG device it holds', () => {
  const view = serverView(shared);
  assert.deepEqual(shutdownPlan(view, KB), { kernelId: KB, name: 'train.ipynb', frees: '4,096 MiB on GPU 1' });
  // KA: its own process on MIG slot 0, a child on GPU 1.
  assert.deepEqual(shutdownPlan(view, KA), {
    kernelId: KA,
    name: 'work/mig.ipynb',
    frees: '1,000 MiB on GPU 0 (MIG 3g.20gb), 1,000 MiB on GPU 1'
  });
  assert.equal(shutdownPlan(view, 'no-such-kernel'), null);
  assert.equal(shutdownPlan(null, KB), null);
  const unknown = serverView({ ...shared, gpus: [{ ...shared.gpus[1], processes: [proc(5, null, kernel('k', [nb('a.ipynb')]))] }] });
  assert.equal(shutdownPlan(unknown, 'k').frees, 'an unknown amount on GPU 1');
});

// -- idle -------------------------------------------------------------------------------------------------------

test('a kernel row says how long the kernel has been idle, or that it is busy', () => {
  const h100 = serverView(shared).gpus[1];
  const byLabel = Object.fromEntries(h100.notebooks.map(n => [n.label, n]));
  assert.equal(byLabel['train.ipynb'].activity, 'idle 12 min');
  assert.match(byLabel['train.ipynb'].title, /has run nothing for 12 min/);
  assert.equal(byLabel.python3.activity, 'busy');
  assert.equal(kernelActivity(kernel('k', [], { idle_s: 20 })).text, 'idle < 1 min');
  assert.equal(kernelActivity(kernel('k', [], { idle_s: null })).text, 'idle');
  assert.equal(kernelActivity(kernel('k', [], { execution_state: 'starting', idle_s: null })).text, 'starting');
  assert.equal(kernelActivity(kernel('k', [], { execution_state: 'unknown', idle_s: null })).text, '');
  assert.equal(kernelActivity(kernel('k', [], { idle_s: undefined })).text, 'idle'); // an older server
});

test('idle spans are coarse: the row changes at most once a minute', () => {
  assert.equal(formatSpan(0), '< 1 min');
  assert.equal(formatSpan(59.9), '< 1 min');
  assert.equal(formatSpan(60), '1 min');
  assert.equal(formatSpan(3599), '59 min');
  assert.equal(formatSpan(3600), '1 h');
  assert.equal(formatSpan(3 * 3600 + 5 * 60 + 30), '3 h 5 min');
  assert.equal(formatSpan(2 * 86400 + 4 * 3600), '2 d 4 h');
  assert.equal(formatSpan(86400), '1 d');
  assert.equal(formatSpan(-5), '< 1 min');
});

// -- whose processes --------------------------------------------------------------------------------------------

test("with own_processes \"server\", the same OS user's other processes are another server's", () => {
  const h100 = serverView(shared).gpus[1];
  const byPid = Object.fromEntries(h100.others.map(o => [o.pid.text, o]));
  assert.equal(byPid['6001'].otherServer, 'not this server’s');
  assert.match(byPid['6001'].title, /another Jupyter server/);
  // Another OS user's process shows its user; it is not tagged as a server of this user.
  assert.equal(byPid['1'].otherServer, '');
  assert.equal(serverView(shared).gpus[0].mig[1].others[0].otherServer, 'not this server’s');
  assert.equal(serverUserOf(shared.gpus), 'ann');
});

test('with own_processes "user" (or an older server) nothing is tagged', () => {
  for (const own of ['user', undefined]) {
    const view = serverView({ ...shared, own_processes: own });
    assert.ok(view.gpus[1].others.every(o => o.otherServer === ''), own);
  }
  // Unknown server user (no kernel on any GPU): every process that is not this server's is tagged.
  const lone = groupByNotebook([proc(3, 10, null, { mine: false })], null, undefined, {
    ownProcesses: 'server',
    serverUser: null
  });
  assert.equal(lone.others[0].otherServer, 'not this server’s');
  const mine = groupByNotebook([proc(3, 10, null, { mine: true })], null, undefined, {
    ownProcesses: 'server',
    serverUser: 'ann'
  });
  assert.equal(mine.others[0].otherServer, '');
});

// -- the page's session ended -----------------------------------------------------------------------------------

test('a 403 says the session ended and offers a reload; other failures retry', () => {
  assert.deepEqual(serverTrouble(403), {
    text: "This page's session with the server has ended (403). Reload the page to sign in again.",
    reload: true
  });
  assert.equal(serverProblem(403), serverTrouble(403).text);
  for (const status of [null, 0, 404, 502]) {
    assert.equal(serverTrouble(status).reload, false, String(status));
    assert.match(serverTrouble(status).text, /retrying…$/);
  }
});

test('the new sentences go through the translation bundle too', () => {
  const marked = {
    __: (msgid, ...args) => `«${strfmt(msgid, ...args)}»`,
    _n: (s, p, n, ...args) => `«${strfmt(n === 1 ? s : p, n, ...args)}»`
  };
  const view = serverView(shared, null, marked);
  assert.equal(view.gpus[0].migLine, '«MIG mode · 2 MIG devices»');
  assert.equal(view.gpus[0].mig[1].utilization.text, '«not reported»');
  const train = view.gpus[1].notebooks.find(n => n.label === 'train.ipynb');
  assert.equal(train.activity, '«idle «12 min»»');
  assert.equal(serverTrouble(403, marked).text.startsWith('«'), true);
  assert.equal(shutdownPlan(view, KB, marked).frees, '««4,096 MiB» on «GPU 1»»');
  assert.equal(view.gpus[1].others.find(o => o.pid.text === '6001').otherServer, '«not this server’s»');
});

test("nothing the new rows print is a JavaScript accident", () => {
  const text = JSON.stringify(serverView(shared));
  for (const accident of ['NaN', 'undefined', '[object Object]', 'null MiB', 'Infinity']) {
    assert.ok(!text.includes(accident), `"${accident}" in the view`);
  }
  assert.ok(KC); // the busy kernel of the fixture, without a notebook
});

test('rows name their kernel by id; the kernels list gives each kernel once, and the view reads the same', () => {
  // The server's wire form: a process says {id, relation}; name, state, idle time and sessions are in `kernels`.
  const slim = structuredClone(shared);
  const full = new Map();
  const strip = processes => {
    for (const proc of Array.isArray(processes) ? processes : []) {
      if (proc.kernel) {
        full.set(proc.kernel.id, { ...proc.kernel });
        proc.kernel = { id: proc.kernel.id, relation: proc.kernel.relation };
      }
    }
  };
  for (const gpu of slim.gpus) {
    strip(gpu.processes);
    for (const mig of gpu.mig_devices || []) strip(mig.processes);
  }
  slim.kernels = [...full.values()].map(({ relation, ...k }) => k);
  const joined = withKernels(slim);
  const proc = joined.gpus.flatMap(g => [...(Array.isArray(g.processes) ? g.processes : []),
    ...(g.mig_devices || []).flatMap(m => m.processes)]).find(p => p.kernel);
  assert.ok(Array.isArray(proc.kernel.sessions) && typeof proc.kernel.name === 'string');
  assert.deepEqual(serverView(slim), serverView(shared));
  // A kernel the list does not name still gets a row, with no sessions.
  const lone = withKernels({ nvml: { available: true }, kernels: [],
    gpus: [{ processes: [{ pid: 5, kernel: { id: 'k', relation: 'child' } }] }] });
  assert.deepEqual(lone.gpus[0].processes[0].kernel, { sessions: [], id: 'k', relation: 'child' });
});
