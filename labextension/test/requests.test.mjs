// Requests that wait for the kernel's answer (the comm's validate): sent again until answered, never shown as lost.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { lostSubshell, PendingRequests } from '../../lib/model/index.js';

/** Timers the test moves by hand. */
function fakeTimers() {
  const intervals = new Map();
  let next = 0;
  return {
    setInterval: (fn, ms) => (intervals.set(++next, { fn, ms }), next),
    clearInterval: handle => intervals.delete(handle),
    tick: () => [...intervals.values()].forEach(({ fn }) => fn()),
    get live() {
      return intervals.size;
    }
  };
}

const closed = () => new Error('closed');

test('a request without an answer is sent again, under its id, until the answer comes', async () => {
  const timers = fakeTimers();
  const pending = new PendingRequests(5000, timers);
  const sent = [];
  const answer = pending.ask(id => ({ request: 'validate', id }), r => (sent.push(r), true), closed);
  assert.deepEqual(sent, [{ request: 'validate', id: 1 }]);
  timers.tick(); // the kernel dropped it (it had not handled the comm's opening yet)
  timers.tick();
  assert.deepEqual(sent.map(r => r.id), [1, 1, 1]);
  assert.equal(pending.answer(1, { ok: true }), true);
  assert.deepEqual(await answer, { ok: true });
  assert.equal(timers.live, 0); // answered: no more sending
  assert.equal(pending.answer(1, { ok: false }), false); // a second answer to a re-sent request is ignored
  timers.tick();
  assert.equal(sent.length, 3);
});

test('two requests wait apart; a closed comm fails those still waiting, once', async () => {
  const timers = fakeTimers();
  const pending = new PendingRequests(5000, timers);
  const first = pending.ask(id => ({ id }), () => true, closed);
  const second = pending.ask(id => ({ id }), () => true, closed);
  assert.equal(pending.size, 2);
  pending.answer(2, 'two');
  assert.equal(await second, 'two');
  pending.rejectAll(() => new Error('the kernel comm closed before it answered'));
  await assert.rejects(first, /closed before it answered/);
  assert.equal(pending.size, 0);
  assert.equal(timers.live, 0);
});

test('nothing to send on: refused at once, nothing left waiting', async () => {
  const timers = fakeTimers();
  const pending = new PendingRequests(5000, timers);
  await assert.rejects(pending.ask(id => ({ id }), () => false, closed), /closed/);
  assert.equal(pending.size, 0);
  assert.equal(timers.live, 0);
});

test('a reply naming an unknown subshell is a lost comm; other replies and errors are not', () => {
  assert.equal(lostSubshell({ status: 'error', ename: 'UnknownSubshellError', evalue: "Unknown subshell_id 'x'" }), true);
  assert.equal(lostSubshell({ status: 'ok' }), false);
  assert.equal(lostSubshell({ status: 'error', ename: 'KeyError' }), false);
  assert.equal(lostSubshell(null), false);
  assert.equal(lostSubshell(undefined), false);
});
