// Unit tests of an untrusted notebook's saved settings waiting for the user (labextension/src/model/consent.ts):
// JupyterLab's trust as the sidebar reads it, the remembered answers, the start's decision and what the sidebar
// says. `node --test labextension/test/`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

import {
  applyStatusView,
  CONSENT_LIMIT,
  consentEntry,
  consentView,
  emptyConsentBook,
  notebookTrusted,
  plainTrans,
  readWords,
  readConsentBook,
  readSaved,
  recordConsent,
  savedChangedSince,
  settingsKey,
  startDecision
} from '../../lib/model/index.js';
import { CONSENT_KEY } from '../../lib/constants.js';

const WORDS = readWords(JSON.parse(readFileSync(new URL('./fixtures/words.json', import.meta.url), 'utf8')));
const code = (trusted, source = 'print(1)') => ({ type: 'code', trusted, hasCode: source.trim() !== '' });
const markdown = trusted => ({ type: 'markdown', trusted, hasCode: true });

// -- trust ----------------------------------------------------------------------------------------------

test('a notebook is trusted when every code cell is, as in JupyterLab', () => {
  assert.equal(notebookTrusted([code(true)]), true); // signed: the server marks every code cell trusted
  assert.equal(notebookTrusted([code(false)]), false); // not signed, outputs or not
  assert.equal(notebookTrusted([code(true), code(false), code(true)]), false); // "2 of 3 code cells trusted"
  // Markdown cells do not count, trusted or not (JupyterLab counts code cells only).
  assert.equal(notebookTrusted([markdown(false), code(true)]), true);
  assert.equal(notebookTrusted([code(true), markdown(false), code(true, '')]), true);
});

test('a notebook without code is not trusted, though JupyterLab says so', () => {
  assert.equal(notebookTrusted([]), false); // "0 of 0 code cells trusted"
  assert.equal(notebookTrusted([markdown(false)]), false); // a file of markdown cells only
  // A file without cells: JupyterLab adds one empty code cell, marked trusted.
  assert.equal(notebookTrusted([code(true, '')]), false);
  assert.equal(notebookTrusted([code(true, ' \n'), code(true, '')]), false);
  assert.equal(notebookTrusted([code(true, ''), code(true, 'x = 1')]), true);
});

test('notebookTrusted takes any iterable of cells, as the model\'s cell list is', () => {
  function* cells() {
    yield code(true);
    yield markdown(false);
  }
  assert.equal(notebookTrusted(cells()), true);
});

// -- the remembered answers -------------------------------------------------------------------------------

const saved = settings => readSaved({ version: 1, apply_on_start: true, settings }).saved;

test('the settings key: the same settings give the same key, any change another', () => {
  const key = settingsKey(saved({ cpus: '2', growth: 'on' }));
  assert.equal(settingsKey(saved({ growth: 'on', cpus: '2' })), key); // key order does not matter
  assert.equal(settingsKey(saved({ cpus: ' 2 ', growth: 'on' })), key); // read trimmed
  assert.equal(settingsKey({ ...saved({ cpus: '2', growth: 'on' }), apply_on_start: false }), key);
  assert.notEqual(settingsKey(saved({ cpus: '3', growth: 'on' })), key);
  assert.notEqual(settingsKey(saved({ cpus: '2' })), key);
  assert.notEqual(settingsKey(saved({ limit: ['2GB --gpu 0', '4GB --gpu 1'] })),
    settingsKey(saved({ limit: ['2GB --gpu 0'] })));
  // a value cannot pass for two settings
  assert.notEqual(settingsKey(saved({ cpus: '2' })), settingsKey(saved({ cpumem: '2' })));
});

test('the book records one answer per notebook, the most recent last', () => {
  let book = emptyConsentBook();
  assert.equal(consentEntry(book, 'a.ipynb'), null);
  book = recordConsent(book, 'a.ipynb', 'k1', false);
  book = recordConsent(book, 'b.ipynb', 'k2', true);
  book = recordConsent(book, 'a.ipynb', 'k1', true);
  assert.deepEqual(book.entries, [
    { path: 'b.ipynb', settings: 'k2', agreed: true },
    { path: 'a.ipynb', settings: 'k1', agreed: true }
  ]);
  assert.deepEqual(consentEntry(book, 'a.ipynb'), { path: 'a.ipynb', settings: 'k1', agreed: true });
  // recordConsent returns a new book: the one given is unchanged
  const before = JSON.stringify(book);
  recordConsent(book, 'c.ipynb', 'k3', true);
  assert.equal(JSON.stringify(book), before);
});

test('the book keeps at most its limit, dropping the oldest', () => {
  let book = emptyConsentBook();
  for (let i = 0; i < 5; i++) {
    book = recordConsent(book, `n${i}.ipynb`, 'k', true, 3);
  }
  assert.deepEqual(book.entries.map(e => e.path), ['n2.ipynb', 'n3.ipynb', 'n4.ipynb']);
  assert.ok(CONSENT_LIMIT >= 100);
});

test('a stored book is read defensively', () => {
  const good = recordConsent(recordConsent(emptyConsentBook(), 'a.ipynb', 'k', true), 'b.ipynb', 'j', false);
  assert.deepEqual(readConsentBook(JSON.parse(JSON.stringify(good))), good);
  for (const raw of [undefined, null, 'x', [], {}, { version: 2, entries: [] }, { version: 1, entries: {} }]) {
    assert.deepEqual(readConsentBook(raw), emptyConsentBook(), JSON.stringify(raw));
  }
  const messy = {
    version: 1,
    entries: [
      { path: 'a.ipynb', settings: 'old', agreed: true },
      { path: 'b.ipynb', settings: 'k', agreed: 'yes' }, // not a boolean: dropped
      'junk',
      { path: 'a.ipynb', settings: 'new', agreed: false } // the same path twice: the last answer wins
    ]
  };
  assert.deepEqual(readConsentBook(messy).entries, [{ path: 'a.ipynb', settings: 'new', agreed: false }]);
  assert.equal(CONSENT_KEY, 'tfgpu_magic:consent');
});

// -- the start's decision ---------------------------------------------------------------------------------

test('a trusted notebook applies, an untrusted one asks, an answer for these settings decides', () => {
  const agreed = { path: 'n.ipynb', settings: 'k', agreed: true };
  const asked = { path: 'n.ipynb', settings: 'k', agreed: false };
  assert.equal(startDecision(true, null, 'k'), 'apply');
  assert.equal(startDecision(false, null, 'k'), 'ask');
  assert.equal(startDecision(false, agreed, 'k'), 'apply'); // remembered
  assert.equal(startDecision(false, agreed, 'other'), 'ask'); // the saved settings changed: ask again
  assert.equal(startDecision(true, agreed, 'other'), 'apply'); // ... unless the notebook is trusted
  assert.equal(startDecision(false, asked, 'k'), 'ask');
  // Asked once and not agreed: a signature the server wrote at an autosave since does not answer for the user.
  assert.equal(startDecision(true, asked, 'k'), 'ask');
  assert.equal(startDecision(true, asked, 'other'), 'apply');
});

// -- what the sidebar says --------------------------------------------------------------------------------

test('the consent line names the settings and is neutral', () => {
  const settings = { cpus: '2', growth: 'on', limit: ['2GB --gpu 0', '4GB --gpu 1'] };
  const view = consentView(settings, false);
  assert.equal(view.text,
    'This notebook is not trusted: its saved settings (cpus 2, growth on, limit 2GB --gpu 0, limit 4GB --gpu 1) were not applied.');
  assert.equal(view.button, 'Apply saved settings');
  assert.match(view.note, /applies them in this kernel now, and remembers it for this notebook/);
  assert.match(view.note, /until the saved settings change/);
  const trusted = consentView({ cpus: '2' }, true);
  assert.equal(trusted.text, 'This notebook is trusted now: its saved settings (cpus 2) apply at the next kernel start.');
  assert.equal(trusted.note, 'Apply saved settings applies them in this kernel now.');
  assert.equal(consentView({}, false).text, 'This notebook is not trusted: its saved settings (none) were not applied.');

  const state = { kind: 'consent', settings: { cpus: '2', growth: 'on' }, trustedNow: false };
  assert.deepEqual(applyStatusView(state), {
    text: 'This notebook is not trusted: its saved settings (cpus 2, growth on) were not applied.',
    level: 'info',
    retry: false
  });
  // nothing was given to the kernel, so nothing "changed since"
  assert.equal(savedChangedSince(state, { cpus: '3' }), false);
});

test('consent lines go through the translator', () => {
  const seen = [];
  const trans = {
    __: (msgid, ...args) => {
      seen.push(msgid);
      return `«${msgid}»${args.length ? `[${args.join('|')}]` : ''}`;
    },
    _n: (msgid, plural, n) => (n === 1 ? msgid : plural)
  };
  const view = consentView({ cpus: '2' }, false, trans);
  assert.equal(view.text, '«This notebook is not trusted: its saved settings (%1) were not applied.»[cpus 2]');
  for (const text of [view.note, view.button, view.title]) {
    assert.match(text, /^«.*»$/);
  }
  assert.equal(seen.length, 4);
});

test('what the user applied says so, not "at kernel start"', () => {
  const ok = { kind: 'result', ok: true, message: null, placement: null, notApplied: [],
    outcomes: [{ setting: 'cpus', asked: '2', status: 'pending', detail: '' }] };
  const done = { kind: 'done', reply: ok, afterRestart: false, kernelName: 'Python 3', consented: true };
  assert.deepEqual(applyStatusView(done, plainTrans, WORDS), {
    text: 'Saved settings applied: cpus 2 → waiting for import', level: 'ok', retry: false });
  assert.match(applyStatusView({ ...done, consented: false }).text, /^Applied at kernel start: /);
  // The kernel ran cells already: its own words say when they apply.
  const late = { kind: 'result', ok: false, outcomes: [], placement: null, notApplied: [],
    message: 'tfgpu: this kernel has run cells already, so the saved settings were not applied now: they apply at its next start (Restart kernel and apply)' };
  assert.equal(applyStatusView({ ...done, reply: late }).text, `Saved settings not applied: ${late.message}`);
  const partly = { ...late, outcomes: ok.outcomes, notApplied: ['growth'], message: 'too late' };
  assert.equal(applyStatusView({ ...done, reply: partly }, plainTrans, WORDS).text,
    'Saved settings partly applied: cpus 2 → waiting for import took effect; not applied: growth, because too late');
  assert.equal(applyStatusView({ kind: 'applying', afterRestart: false, consented: true }).text,
    'Applying the saved settings…');
});
