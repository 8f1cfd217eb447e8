// Graphics processes in the sidebar's model (labextension/src/model/processes.ts): nvidia-smi's type ("G", "C+G") as a
// tag on another process's row and on a notebook's row, its meaning in the tooltip, through the translator; compute
// processes and an older server's processes (no type) untagged. `node --test labextension/test/`.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { groupByNotebook, NO_TAG, plainTrans, processTag, serverView } from '../../lib/model/index.js';

const kernel = (id, relation = 'kernel') => ({
  id,
  name: 'python3',
  execution_state: 'idle',
  relation,
  sessions: [{ path: `${id}.ipynb`, name: `${id}.ipynb`, type: 'notebook' }]
});
const proc = (pid, used, type, kernelInfo = null, name = 'python') => ({
  pid,
  used_mib: used,
  name,
  user: 'ann',
  ...(type === undefined ? {} : { type }),
  kernel: kernelInfo
});

test('a process tag is nvidia-smi type: G for graphics only, C+G where compute and graphics meet, none for compute', () => {
  assert.deepEqual(processTag(['C']), NO_TAG);
  assert.deepEqual(processTag([undefined, null, 'something new']), NO_TAG);
  assert.equal(processTag(['G']).text, 'G');
  assert.equal(processTag(['G', 'G']).text, 'G');
  assert.equal(processTag(['C+G']).text, 'C+G');
  assert.equal(processTag(['C', 'G']).text, 'C+G'); // one compute and one graphics process of one notebook
  assert.equal(processTag(['G', undefined]).text, 'C+G'); // an untyped process is a compute one
  assert.match(processTag(['G']).title, /graphics process list \(nvidia-smi’s type G\)/);
  assert.match(processTag(['C+G']).title, /type C\+G\); its memory is counted once/);
});

test('other processes: a graphics one is tagged, a compute one is not, the tag in its tooltip too', () => {
  const { others } = groupByNotebook([proc(1, 100, 'C'), proc(2, 180, 'G', null, 'Xorg'), proc(3, 50, 'C+G'), proc(4, 9)]);
  assert.deepEqual(
    others.map(o => [o.pid.text, o.tag.text]),
    [['1', ''], ['2', 'G'], ['3', 'C+G'], ['4', '']]
  );
  assert.ok(others[1].title.includes(others[1].tag.title) && others[1].tag.title);
  assert.equal(others[0].title.includes('graphics'), false);
  assert.equal(others[1].memory.text, '180 MiB');
});

test('a notebook whose kernel renders: its graphics memory is its own, tagged, each pid typed in the tooltip', () => {
  const k = kernel('render');
  const { notebooks, others } = groupByNotebook([
    proc(10, 1024, 'C+G', k),
    proc(11, 300, 'G', { ...k, relation: 'child' }),
    proc(12, 99, 'G', null, 'Xorg')
  ]);
  assert.equal(others.length, 1);
  const [row] = notebooks;
  assert.equal(row.usedMib, 1024 + 300); // a C+G process counted once, a graphics child added like a compute one
  assert.equal(row.memory.text, '1,324 MiB');
  assert.equal(row.tag.text, 'C+G');
  assert.ok(row.title.includes('pid 10 (the kernel, C+G)') && row.title.includes('pid 11 (a child process of the kernel, G)'));
  assert.ok(row.shutdown);
  const graphicsOnly = groupByNotebook([proc(20, 5, 'G', kernel('egl'))]).notebooks[0];
  assert.equal(graphicsOnly.tag.text, 'G');
  const compute = groupByNotebook([proc(30, 5, 'C', kernel('train')), proc(31, 5, undefined, kernel('train', 'child'))]);
  assert.deepEqual(compute.notebooks[0].tag, NO_TAG);
  assert.ok(!compute.notebooks[0].title.includes(', C'));
});

test('the tag and its tooltip go through the translator', () => {
  const upper = { __: (msgid, ...args) => plainTrans.__(msgid, ...args).toUpperCase(), _n: plainTrans._n };
  const { others } = groupByNotebook([proc(2, 180, 'G')], null, upper);
  assert.equal(others[0].tag.text, 'G');
  assert.equal(others[0].tag.title, others[0].tag.title.toUpperCase());
  assert.equal(processTag(['C+G'], { ...upper, __: () => 'Rechnen+Grafik' }).text, 'Rechnen+Grafik');
});

test('the server view tags a GPU and a MIG device process by type', () => {
  const answer = {
    schema: 1,
    nvml: { available: true, error: null, driver_version: '550.54.15', cuda_driver_version: '12.4' },
    kernels: [],
    gpus: [
      {
        index: 0,
        name: 'NVIDIA L4',
        memory_total_mib: 23034,
        memory_used_mib: 380,
        processes: [
          { pid: 4242, used_mib: 200, name: 'python', user: 'ann', type: 'C', kernel: null },
          { pid: 1717, used_mib: 180, name: 'Xorg', user: 'root', type: 'G', kernel: null }
        ],
        hidden_processes: null,
        kernel_note: '',
        mig_devices: []
      },
      {
        index: 1,
        name: 'NVIDIA A100-SXM4-40GB',
        memory_total_mib: 40960,
        memory_used_mib: 100,
        mig_mode: true,
        processes: [],
        hidden_processes: null,
        kernel_note: '',
        mig_devices: [
          {
            uuid: 'MIG-5e8b0c1a-2f3d-5a6b-9c7d-0e1f2a3b4c5d',
            index: 0,
            profile: '3g.20gb',
            memory_total_mib: 19968,
            memory_used_mib: 100,
            processes: [{ pid: 77, used_mib: 40, name: 'vkcube', user: 'ann', type: 'C+G', kernel: null }],
            hidden_processes: null,
            kernel_note: ''
          }
        ]
      }
    ]
  };
  const view = serverView(answer);
  assert.deepEqual(
    view.gpus[0].others.map(o => [o.name.text, o.tag.text]),
    [['python', ''], ['Xorg', 'G']]
  );
  assert.deepEqual(
    view.gpus[1].mig[0].others.map(o => [o.name.text, o.tag.text]),
    [['vkcube', 'C+G']]
  );
});
