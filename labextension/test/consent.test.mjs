// Unit tests of saved settings waiting for the user's agreement (labextension/src/model/consent.ts): what the page
// remembers of the server's answers, the request and answer of POST tfgpu/api/consent, and what the sidebar says.
// `node --test labextension/test/`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';

import {
  applyStatusView,
  canonicalSettings,
  consentRequest,
  consentView,
  plainTrans,
  readConsentAnswer,
  readSaved,
  readSettingWords,
  readWords,
  savedChangedSince,
  settingsKey
} from '../../lib/model/index.js';
import * as model from '../../lib/model/index.js';
import * as constants from '../../lib/constants.js';

const fixture = name => JSON.parse(readFileSync(new URL(`./fixtures/${name}`, import.meta.url), 'utf8'));
const WORDS = readWords(fixture('words.json'));
const SETTINGS = readSettingWords(fixture('setting_words.json'));
const saved = settings => readSaved({ version: 1, apply_on_start: true, settings }, SETTINGS).saved;

// -- what the page remembers, what it asks --------------------------------------------------------------------

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

test('the settings key reads settings as the server\'s digest does (tfgpu_magic/core/consent.py canonical)', t => {
  // The words' order plays no part: the page and the server tell the same settings apart.
  const settings = { limit: ['2GB --gpu 0', ' 4GB --gpu 1 '], cpus: ' 2', growth: ['on'] };
  assert.equal(canonicalSettings(settings), '{"cpus":["2"],"growth":["on"],"limit":["2GB --gpu 0","4GB --gpu 1"]}');
  assert.equal(canonicalSettings({ growth: 'on', cpus: '2' }), canonicalSettings({ cpus: ['2'], growth: ' on' }));
  assert.equal(canonicalSettings(null), '{}');
  const python = new URL('../../.venv/bin/python', import.meta.url).pathname;
  if (!existsSync(python)) {
    t.skip('no .venv/bin/python');
    return;
  }
  const out = execFileSync(python, ['-c', [
    'import json, sys',
    'from tfgpu_magic.core.consent import canonical',
    'sys.stdout.write(canonical("work/a.ipynb", json.loads(sys.argv[1])).decode())'
  ].join('\n'), JSON.stringify(settings)], { encoding: 'utf8', cwd: new URL('../..', import.meta.url).pathname });
  assert.equal(out, `["work/a.ipynb",${canonicalSettings(settings)}]`);
});

test('the consent request carries the path and the settings as read, never apply_on_start', () => {
  const document = saved({ growth: ' on ', cpus: '2', limit: ['2GB --gpu 0'] });
  assert.deepEqual(consentRequest('work/a.ipynb', document, true), {
    path: 'work/a.ipynb',
    settings: { cpus: '2', growth: 'on', limit: ['2GB --gpu 0'] },
    agree: true
  });
  assert.equal(consentRequest('a.ipynb', document, false).agree, false);
  assert.deepEqual(Object.keys(consentRequest('a.ipynb', document, false)), ['path', 'settings', 'agree']);
});

test('only an answer that says agreed is agreement', () => {
  assert.equal(readConsentAnswer({ agreed: true }), true);
  for (const raw of [{ agreed: false }, { agreed: 'true' }, { agreed: 1 }, {}, null, undefined, 'agreed', [true],
    { agreed: false, message: 'tfgpu: cannot read or keep the consent: ...' }]) {
    assert.equal(readConsentAnswer(raw), false, JSON.stringify(raw));
  }
});

test('nothing of the workspace answer book or of notebook trust is left', () => {
  for (const name of ['notebookTrusted', 'startDecision', 'readConsentBook', 'recordConsent', 'consentEntry',
    'emptyConsentBook', 'CONSENT_LIMIT']) {
    assert.equal(model[name], undefined, name);
  }
  assert.equal(constants.CONSENT_KEY, undefined);
  assert.equal(constants.API_CONSENT, 'consent');
});

// -- what the sidebar says --------------------------------------------------------------------------------

test('the consent box names the settings, says why, and is neutral', () => {
  const settings = { cpus: '2', growth: 'on', limit: ['2GB --gpu 0', '4GB --gpu 1'] };
  const view = consentView(settings);
  assert.equal(view.text,
    'Not applied: you have not agreed to this notebook’s saved settings (cpus 2, growth on, limit 2GB --gpu 0, limit 4GB --gpu 1).');
  assert.doesNotMatch(view.text, /trusted/); // trust is not what decides
  assert.equal(view.button, 'Apply saved settings');
  assert.match(view.note, /A notebook from elsewhere can carry any settings/);
  assert.match(view.note, /remembers your answer on this server, in every workspace/);
  assert.match(view.note, /until its saved settings change/);
  assert.equal(consentView({}).text, 'Not applied: you have not agreed to this notebook’s saved settings (none).');

  const state = { kind: 'consent', settings: { cpus: '2', growth: 'on' } };
  assert.deepEqual(applyStatusView(state), {
    text: 'Not applied: you have not agreed to this notebook’s saved settings (cpus 2, growth on).',
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
  const view = consentView({ cpus: '2' }, trans);
  assert.equal(view.text, '«Not applied: you have not agreed to this notebook’s saved settings (%1).»[cpus 2]');
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
