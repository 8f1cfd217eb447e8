// The page's one feed of the server's answer (labextension/src/feed.ts, its pure half model/feed.ts): who needs it,
// what is kept of each answer, and when it asks, on timers the test moves by hand (node's mock timers under the
// real Lumino Poll). `node --test labextension/test/`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

import { clampInterval, failedStatus, GpuFeed } from '../../lib/feed.js';
import { AnswerState, Demand, mayRest, readSettingWords } from '../../lib/model/index.js';

const fixture = name => JSON.parse(readFileSync(new URL(`./fixtures/${name}`, import.meta.url), 'utf8'));
const gpus = fixture('gpus.json');
const SETTINGS = readSettingWords(fixture('setting_words.json'));

// -- the pure half ----------------------------------------------------------------------------------------

test('demand: needed while any reader needs it; each reader counted once', () => {
  const demand = new Demand();
  assert.equal(demand.needed, false);
  assert.equal(demand.need('sidebar', true), true);
  assert.equal(demand.need('sidebar', true), false); // already
  assert.equal(demand.need('statusbar', true), true);
  assert.deepEqual(demand.readers, ['sidebar', 'statusbar']);
  assert.equal(demand.need('sidebar', false), true);
  assert.equal(demand.needed, true); // the status bar still does
  assert.equal(demand.need('statusbar', false), true);
  assert.equal(demand.need('statusbar', false), false);
  assert.equal(demand.needed, false);
});

test('an answer: its data, words, setting words, history and the server\'s clock, read once for every view', () => {
  const state = new AnswerState();
  assert.equal(state.data, undefined);
  assert.equal(state.current, null);
  assert.equal(state.settingWords, null);
  assert.deepEqual(state.query(), { history: '600' }); // the whole chart window at first
  const history = { interval_s: 1, sampling: true, gpus: { 0: { t: [100, 101], memory_used_mib: [3, 4], utilization_gpu_pct: [1, 2] } } };
  state.take({ ...gpus, taken_at: 101.5, history });
  assert.equal(state.current, state.data);
  assert.equal(state.failure, null);
  assert.equal(state.words.missing, gpus.words.missing);
  assert.deepEqual(state.settingWords, SETTINGS);
  assert.equal(state.serverNow, 101.5);
  assert.deepEqual(state.query(), { history: '600', since: '101' }); // then only what is new
});

test('a failed request: no current figures, the last answer and the setting words kept', () => {
  const state = new AnswerState();
  state.take(gpus);
  state.fail(503);
  assert.deepEqual(state.failure, { status: 503 });
  assert.equal(state.current, null); // the status bar hides rather than show old figures
  assert.equal(state.data, gpus); // the sidebar shows them under its trouble line
  assert.deepEqual(state.settingWords, SETTINGS);
  state.take({ ...gpus, setting_words: undefined }); // an answer without them does not forget them
  assert.deepEqual(state.settingWords, SETTINGS);
  assert.equal(state.failure, null);
});

test('the poll rests only with no reader and the settings named', () => {
  const demand = new Demand();
  const state = new AnswerState();
  assert.equal(mayRest(demand, state), false); // the saved settings wait for the first answer's setting words
  state.take({ ...gpus, setting_words: undefined });
  assert.equal(mayRest(demand, state), false);
  state.take(gpus);
  assert.equal(mayRest(demand, state), true);
  demand.need('sidebar', true);
  assert.equal(mayRest(demand, state), false);
});

test('a failure\'s status is read by its shape; the interval is clamped to the schema\'s range', () => {
  assert.equal(failedStatus({ response: { status: 404 } }), 404);
  assert.equal(failedStatus(new TypeError('Failed to fetch')), null);
  assert.equal(failedStatus(null), null);
  assert.equal(clampInterval(0.1), 0.5);
  assert.equal(clampInterval(600), 60);
  assert.equal(clampInterval('2'), 2);
  assert.equal(clampInterval(5), 5);
});

// -- the feed on hand-moved timers -------------------------------------------------------------------------

/** A server the test answers: each request recorded with its query, answered with `next()`'s answer. */
function fakeServer(answer = () => gpus) {
  const requests = [];
  return {
    requests,
    request: query => {
      requests.push(query);
      try {
        return Promise.resolve(answer());
      } catch (error) {
        return Promise.reject(error);
      }
    }
  };
}

/**
 * Move the mocked clock by `ms` in steps of 10 ms, letting each promise the poll awaits settle after each (the
 * poll sets its next timer only once they have).
 */
async function advance(t, ms) {
  for (let moved = 0; moved < ms; moved += 10) {
    t.mock.timers.tick(Math.min(10, ms - moved));
    await new Promise(resolve => setImmediate(resolve));
  }
}

function feedOn(t, server, interval = 2) {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  const feed = new GpuFeed({ request: server.request, interval });
  const changes = [];
  feed.changed.connect(() => changes.push(feed.failure));
  t.after(() => feed.dispose());
  return { feed, changes };
}

test('nobody reading: one request at start (it names the settings), then the feed rests', async t => {
  const server = fakeServer();
  const { feed, changes } = feedOn(t, server);
  await advance(t, 100);
  assert.equal(server.requests.length, 1);
  assert.deepEqual(feed.settingWords, SETTINGS);
  assert.equal(changes.length, 1);
  await advance(t, 20000);
  assert.equal(server.requests.length, 1); // resting: asks nothing
});

test('while a reader needs it, one request every interval for every reader; a new reader gets one at once', async t => {
  const server = fakeServer();
  const { feed } = feedOn(t, server);
  await advance(t, 100);
  feed.need('statusbar', true); // its setting on: a fresh answer now, then every 2 s
  await advance(t, 100);
  assert.equal(server.requests.length, 2);
  await advance(t, 4000);
  assert.equal(server.requests.length, 4);
  feed.need('sidebar', true); // shown: at once, and still one request a tick for both
  await advance(t, 100);
  assert.equal(server.requests.length, 5);
  await advance(t, 2000);
  assert.equal(server.requests.length, 6);
  assert.deepEqual(server.requests[5], { history: '600' }); // the fixture keeps no history: the whole window again
  feed.need('sidebar', false);
  feed.need('statusbar', false);
  await advance(t, 2000); // the tick already scheduled rests
  const before = server.requests.length;
  await advance(t, 10000);
  assert.equal(server.requests.length, before);
});

test('a changed interval applies at once while needed', async t => {
  const server = fakeServer();
  const { feed } = feedOn(t, server);
  feed.need('sidebar', true);
  await advance(t, 100);
  const start = server.requests.length;
  feed.interval = 5;
  assert.equal(feed.interval, 5);
  await advance(t, 100);
  assert.equal(server.requests.length, start + 1); // asked at once
  await advance(t, 4800);
  assert.equal(server.requests.length, start + 1);
  await advance(t, 300);
  assert.equal(server.requests.length, start + 2);
});

test('a server that fails: its status told, the wait grows (backoff), and the first answer ends both', async t => {
  let fail = true;
  const server = fakeServer(() => {
    if (fail) {
      throw { response: { status: 503 } };
    }
    return gpus;
  });
  const random = Math.random;
  Math.random = () => 0.999; // the longest of Lumino's random backoff: three times the last wait
  t.after(() => (Math.random = random));
  const { feed, changes } = feedOn(t, server);
  feed.need('sidebar', true);
  await advance(t, 100);
  assert.deepEqual(feed.failure, { status: 503 });
  assert.equal(feed.current, null);
  const times = [];
  for (let now = 0; now < 60000; now += 100) {
    const before = server.requests.length;
    await advance(t, 100);
    if (server.requests.length > before) {
      times.push(now);
    }
  }
  const waits = times.slice(1).map((time, i) => time - times[i]);
  assert.ok(waits.length >= 2 && waits.every((wait, i) => i === 0 || wait > waits[i - 1]), `waits ${waits}`);
  fail = false;
  await feed.refresh();
  await advance(t, 100);
  assert.equal(feed.failure, null);
  assert.equal(feed.current, feed.data);
  assert.ok(changes.length > 2);
});
