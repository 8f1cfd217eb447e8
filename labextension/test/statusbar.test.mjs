// The status-bar item's text from the sidebar's answer: the front notebook's kernel's GPU memory and where it is.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { statusBarView, statusMemory } from '../../lib/model/index.js';

const answer = gpus => ({ nvml: { available: true }, kernels: [{ id: 'k1', name: 'python3', sessions: [] }], gpus });
const proc = (pid, mib, kernel = 'k1') => ({ pid, used_mib: mib, kernel: kernel ? { id: kernel, relation: 'kernel' } : null });

test('one GPU: "GPU 1 · 6.0 GiB"; the kernel and its children summed', () => {
  const view = statusBarView(answer([
    { index: 0, processes: [proc(9, 500, null)] },
    { index: 1, processes: [proc(10, 4096), { ...proc(11, 2048), kernel: { id: 'k1', relation: 'child' } }] }
  ]), 'k1');
  assert.equal(view.text, 'GPU 1 · 6.0 GiB');
  assert.match(view.title, /GPU 1: 6,144 MiB/);
  assert.match(view.title, /Click to show the GPUs sidebar/);
});

test('several GPUs, MIG devices by parent/slot, MiB below a GiB', () => {
  const view = statusBarView(answer([
    { index: 0, processes: [proc(10, 300)] },
    { index: 3, processes: [proc(10, 700)], mig_devices: [{ index: 0, processes: [proc(10, 700)] }, { index: 1, processes: [] }] }
  ]), 'k1');
  assert.equal(view.text, 'GPUs 0, 3/0 · 1,000 MiB');
  assert.equal(statusMemory(1536), '1.5 GiB');
});

test('hidden (null) with no GPU memory, no kernel, another kernel, no NVML or no answer', () => {
  const gpus = [{ index: 1, processes: [proc(10, 4096, 'other')] }];
  assert.equal(statusBarView(answer(gpus), 'k1'), null);
  assert.equal(statusBarView(answer(gpus), null), null);
  assert.equal(statusBarView({ nvml: { available: false }, gpus: [] }, 'k1'), null);
  assert.equal(statusBarView(undefined, 'k1'), null);
  assert.equal(statusBarView(answer([{ index: 1, processes: { unavailable: 'no_permission' } }]), 'k1'), null);
});

test('a MIG device without its number is named with the data\'s word for a missing value', () => {
  const data = { ...answer([{ index: 3, processes: [], mig_devices: [{ processes: [proc(10, 700)] }] }]), words: { missing: 'WORD' } };
  assert.equal(statusBarView(data, 'k1').text, 'GPU 3/WORD · 700 MiB');
});
