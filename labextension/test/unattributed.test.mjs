// A server in a container (issue 33): NVML's PIDs are the host's, so the processes the server cannot place are no
// rows but one line per GPU or MIG device (the document's `unattributed`), the PID note shows once, a kernel matched
// another way than by its PID says how in its tooltip, and a kernel report's note shows. Hand-made answers of
// GET tfgpu/api/gpus's shape. `node --test`.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { kernelReportLines, pidsNote, serverView, unattributedLine } from '../../lib/model/index.js';

const CONTAINER = {
  comparable: false,
  view: 'none',
  note: "this process's PID namespace differs from the driver's (a container): NVML's PIDs are the host's"
};
const HOST = { comparable: true, view: 'host', note: '' };
const LINE = "12,288 MiB held by 2 processes this server cannot attribute: its PID namespace differs from the driver's";
const KA = 'aaaa1111-0000-4000-8000-000000000001';
const KB = 'bbbb2222-0000-4000-8000-000000000002';

const nb = path => ({ path, name: path, type: 'notebook' });
const lost = (count, used, text) => ({ count, used_mib: used, text });
const gpu = (index, extra = {}) => ({
  index,
  name: 'NVIDIA A100-SXM4-40GB',
  memory_total_mib: 40960,
  memory_used_mib: 14000,
  utilization_gpu_pct: 10,
  temperature_c: 40,
  error: null,
  processes: [],
  hidden_processes: null,
  kernel_note: '',
  unattributed: null,
  mig_mode: null,
  mig_devices: [],
  ...extra
});
const mig = (index, uuid, extra = {}) => ({
  uuid,
  index,
  profile: '3g.20gb',
  memory_total_mib: 19968,
  memory_used_mib: 3000,
  processes: [],
  hidden_processes: null,
  kernel_note: '',
  unattributed: null,
  ...extra
});
const answer = (gpus, extra = {}) => ({
  nvml: { available: true, error: null, driver_version: '550.54.15', cuda_driver_version: '12.4' },
  gpus,
  kernels: [],
  kernel_note: '',
  pids: CONTAINER,
  ...extra
});
const own = (how, kernelId = KA) => ({
  pid: 910001,
  used_mib: 1024,
  name: 'python',
  user: 'ann',
  kernel: { id: kernelId, relation: 'kernel', how }
});
const kernelEntry = (id, path, report = null) => ({
  id,
  name: 'python3',
  execution_state: 'idle',
  sessions: path ? [nb(path)] : [],
  idle_s: 60,
  report
});

test("a GPU's unattributed processes are one line, the server's sentence, beside its rows", () => {
  const view = serverView(
    answer([gpu(0, { processes: [own('handshake')], unattributed: lost(2, 12288, LINE) }), gpu(1)], {
      kernels: [kernelEntry(KA, 'train.ipynb', { host_pid: 910001, how: 'handshake', note: '' })]
    })
  );
  const [gpu0, gpu1] = view.gpus;
  assert.equal(gpu0.unattributed, LINE);
  assert.deepEqual(gpu0.others, []); // no rows of host numbers
  assert.deepEqual(gpu0.notebooks.map(n => n.label), ['train.ipynb']);
  assert.equal(gpu1.unattributed, null);
  // Once, for the whole list, as a sentence.
  assert.equal(view.pidsNote, "This process's PID namespace differs from the driver's (a container): NVML's PIDs are the host's.");
});

test('a kernel matched other than by its PID says how in its tooltip; by its PID it says nothing new', () => {
  const tooltip = how =>
    serverView(answer([gpu(0, { processes: [own(how)] })], { kernels: [kernelEntry(KA, 'a.ipynb')] })).gpus[0]
      .notebooks[0].title;
  assert.match(tooltip('host_view'), /Matched through the host \/proc\./);
  assert.match(tooltip('handshake'), /Matched by the kernel's own report\./);
  assert.doesNotMatch(tooltip('pid'), /Matched/);
});

test("a kernel report's note shows once for the list and in its row's tooltip", () => {
  const note = 'ambiguous: 2 processes appeared on GPU 0 while its TensorFlow started; its memory is not guessed';
  const view = serverView(
    answer([gpu(0, { processes: [own('handshake', KB)], unattributed: lost(2, 12288, LINE) })], {
      kernels: [
        kernelEntry(KA, 'work/ambiguous.ipynb', { host_pid: null, how: 'handshake', note }),
        kernelEntry(KB, null, { host_pid: 910001, how: 'handshake', note: 'a note of its own' }),
        kernelEntry('cccc3333-0000-4000-8000-000000000003', 'quiet.ipynb', { host_pid: 3, how: 'handshake', note: '' })
      ]
    })
  );
  assert.deepEqual(view.kernelReports, [
    { kernelId: KA, text: `work/ambiguous.ipynb: ${note}` },
    { kernelId: KB, text: 'python3 (kernel bbbb2222): a note of its own' }
  ]);
  assert.match(view.gpus[0].notebooks[0].title, /a note of its own/);
});

test('a GPU in MIG mode shows its MIG devices’ lines, not its own', () => {
  const a = 'MIG-5e8b0c1a-2f3d-5a6b-9c7d-0e1f2a3b4c5d';
  const b = 'MIG-9d2c4e6f-7a8b-5c9d-8e0f-1a2b3c4d5e6f';
  const lineA = '3,000 MiB held by 1 process this server cannot attribute: its PID namespace differs from the driver’s';
  const parent = gpu(0, {
    mig_mode: true,
    unattributed: lost(1, 3000, 'the union: said by its device'),
    mig_devices: [mig(0, a, { unattributed: lost(1, 3000, lineA) }), mig(1, b)]
  });
  const [row] = serverView(answer([parent])).gpus;
  assert.equal(row.unattributed, null);
  assert.deepEqual(
    row.mig.map(m => m.unattributed),
    [lineA, null]
  );
});

test('on the host nothing new shows: no PID note, no line, no report', () => {
  const view = serverView(
    answer([gpu(0, { processes: [own('pid')] })], { pids: HOST, kernels: [kernelEntry(KA, 'a.ipynb')] })
  );
  assert.equal(view.pidsNote, '');
  assert.deepEqual(view.kernelReports, []);
  assert.equal(view.gpus[0].unattributed, null);
  // An older server: no `pids`, no `unattributed`, no `report`.
  const older = serverView({ ...answer([gpu(0)]), pids: undefined });
  assert.equal(older.pidsNote, '');
  assert.equal(older.gpus[0].unattributed, null);
  assert.equal(pidsNote(null), '');
  assert.deepEqual(kernelReportLines(undefined), []);
});

test('without the server’s sentence the figures still say it, and no figure is never a zero', () => {
  assert.equal(unattributedLine(lost(2, 12288, '')), '12,288 MiB held by 2 processes this server cannot attribute');
  assert.equal(unattributedLine(lost(1, null)), 'memory n/a held by 1 process this server cannot attribute');
  assert.equal(unattributedLine(null), null);
  assert.equal(unattributedLine(lost(0, 0, '')), null);
});
