// Unit tests of the saved settings' pure logic (labextension/src/model/): the metadata's shape, the first cell,
// the silent apply's code and reply, the kernel's refusals and its comm answers. The settings there are come from
// the data (fixtures/setting_words.json: tfgpu_magic/core/settings wire_words()). `node --test labextension/test/`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

import {
  applyCode,
  applyStatusView,
  APPLY_USER_EXPRESSION,
  checkSettings,
  editorText,
  firstCellSource,
  isFirstCellSource,
  outcomesText,
  parseApplyReply,
  parseKernelRequest,
  parseValidated,
  plainTrans,
  readWords,
  refusalParts,
  readSaved,
  refusedView,
  savedChangedSince,
  savedDocument,
  savedRows,
  readSettingWords,
  settingLines,
  settingsFromEditor,
  waitProgress
} from '../../lib/model/index.js';

const fixture = name => JSON.parse(readFileSync(new URL(`./fixtures/${name}`, import.meta.url), 'utf8'));
const WORDS = readWords(fixture('words.json'));
const SETTINGS = readSettingWords(fixture('setting_words.json'));

const ALL = {
  visible: '1',
  growth: 'on',
  limit: '40%',
  virtual: '2x2GB',
  cpus: '3',
  cpumem: 'on',
  placement: 'on'
};

// -- the metadata's shape --------------------------------------------------------------------------------

test('a notebook without the key has nothing saved', () => {
  assert.deepEqual(readSaved(undefined, SETTINGS), { kind: 'none' });
  assert.deepEqual(readSaved(null, SETTINGS), { kind: 'none' });
});

test('the documented example reads as is, settings in apply order', () => {
  const read = readSaved({ version: 1, apply_on_start: true, settings: ALL }, SETTINGS);
  assert.equal(read.kind, 'ok');
  assert.equal(read.saved.version, 1);
  assert.equal(read.saved.apply_on_start, true);
  assert.deepEqual(Object.keys(read.saved.settings), [
    'visible',
    'cpus',
    'cpumem',
    'growth',
    'limit',
    'virtual',
    'placement'
  ]);
  assert.deepEqual(read.saved.settings, ALL);
});

test('a missing version is read as 1; a missing apply_on_start as off; missing settings as none', () => {
  const read = readSaved({ apply_on_start: true, settings: { cpus: ' 3 ' } }, SETTINGS);
  assert.deepEqual(read, { kind: 'ok', saved: { version: 1, apply_on_start: true, settings: { cpus: '3' } } });
  assert.deepEqual(readSaved({ settings: { cpus: '3' } }, SETTINGS).saved.apply_on_start, false);
  assert.deepEqual(readSaved({ version: 1 }, SETTINGS), { kind: 'ok', saved: { version: 1, apply_on_start: false, settings: {} } });
});

test('a newer version is not applied, and says which', () => {
  const read = readSaved({ version: 2, apply_on_start: true, settings: { cpus: '3', future: 'x' } }, SETTINGS);
  assert.equal(read.kind, 'newer');
  assert.equal(read.version, 2);
  assert.equal(read.message, 'saved by a newer tfgpu_magic (version 2); this one reads version 1');
});

test('a bad shape says what is wrong', () => {
  const cases = [
    ['on', 'invalid', /tfgpu metadata is "on", not an object/],
    [[1], 'invalid', /not an object/],
    [{ version: 0 }, 'invalid', /bad tfgpu metadata version 0: expected 1/],
    [{ version: '1' }, 'invalid', /bad tfgpu metadata version "1"/],
    [{ version: 1.5 }, 'invalid', /version 1.5/],
    [{ apply_on_start: 'yes' }, 'invalid', /apply_on_start is "yes", not true or false/],
    [{ settings: [] }, 'invalid', /settings are \[\], not an object/],
    [{ settings: { gpus: '1' } }, 'invalid', /unknown saved setting "gpus"; valid: visible, cpus, cpumem, allocator, growth, limit, virtual, placement/],
    [{ settings: { cpus: 3 } }, 'invalid', /saved cpus is 3: expected the text after `%tfgpu cpus`$/],
    [{ settings: { cpus: '' } }, 'invalid', /saved cpus is "": expected/],
    [{ settings: { cpus: '  ' } }, 'invalid', /saved cpus is/],
    [{ settings: { growth: ['on', 'off'] } }, 'invalid', /saved growth is \["on","off"\]: expected the text after `%tfgpu growth`$/],
    [{ settings: { limit: [] } }, 'invalid', /saved limit is \[\]: .*or a list of them, one per GPU/],
    [{ settings: { limit: ['2GB --gpu 0', 4] } }, 'invalid', /saved limit is/],
    [{ settings: { virtual: { gpu: 0 } } }, 'invalid', /saved virtual is \{"gpu":0\}/]
  ];
  for (const [raw, kind, message] of cases) {
    const read = readSaved(raw, SETTINGS);
    assert.equal(read.kind, kind, JSON.stringify(raw));
    assert.match(read.message, message, JSON.stringify(raw));
  }
});

test('a per-GPU list is kept as a list (limit and virtual), a one-item list too', () => {
  const read = readSaved({ settings: { limit: ['2GB --gpu 0', ' 4GB --gpu 1'], virtual: ['2x2GB --gpu 0'] } }, SETTINGS);
  assert.equal(read.kind, 'ok');
  assert.deepEqual(read.saved.settings, { limit: ['2GB --gpu 0', '4GB --gpu 1'], virtual: ['2x2GB --gpu 0'] });
  assert.deepEqual(checkSettings({ limit: ['2GB --gpu 0'] }, SETTINGS), { ok: true, settings: { limit: ['2GB --gpu 0'] } });
  // null is "not set", as in the kernel
  assert.deepEqual(checkSettings({ cpus: null, growth: 'on' }, SETTINGS), { ok: true, settings: { growth: 'on' } });
});

test('the document written puts the version and the flag with the settings in order', () => {
  assert.deepEqual(savedDocument({ placement: 'on', cpus: '3' }, true, SETTINGS), {
    version: 1,
    apply_on_start: true,
    settings: { cpus: '3', placement: 'on' }
  });
  assert.deepEqual(Object.keys(savedDocument({ placement: 'on', cpus: '3' }, false, SETTINGS).settings), ['cpus', 'placement']);
});

// -- the editor ------------------------------------------------------------------------------------------

test('editor texts: empty is not set, "; " separates per-GPU values, other settings keep their text whole', () => {
  assert.deepEqual(
    settingsFromEditor({
      visible: ' 1 ',
      cpus: '',
      growth: '  ',
      limit: '2GB --gpu 0; 4GB --gpu 1;',
      virtual: '2x2GB',
      placement: 'a;b'
    }, SETTINGS),
    { visible: '1', limit: ['2GB --gpu 0', '4GB --gpu 1'], virtual: '2x2GB', placement: 'a;b' }
  );
  assert.equal(editorText(['2GB --gpu 0', '4GB --gpu 1']), '2GB --gpu 0; 4GB --gpu 1');
  assert.equal(editorText('40%'), '40%');
  assert.equal(editorText(undefined), '');
  // rows of read settings, so in apply order
  const read = readSaved({ settings: { placement: 'on', limit: ['1GB --gpu 0', '2GB --gpu 1'] } }, SETTINGS).saved.settings;
  assert.deepEqual(savedRows(read), [
    { name: 'limit', value: '1GB --gpu 0; 2GB --gpu 1' },
    { name: 'placement', value: 'on' }
  ]);
});

// -- the first cell --------------------------------------------------------------------------------------

test('firstCellSource: %load_ext, then one %tfgpu line per value in apply order, per-GPU lists one line each', () => {
  const source = firstCellSource({
    version: 1,
    apply_on_start: true,
    settings: {
      placement: 'on',
      limit: ['2GB --gpu 0', '4GB --gpu 1'],
      virtual: '2x2GB',
      growth: 'on',
      cpumem: 'on',
      cpus: '3',
      visible: '1'
    }
  }, SETTINGS);
  assert.equal(
    source,
    [
      '%load_ext tfgpu_magic',
      '%tfgpu visible 1',
      '%tfgpu cpus 3',
      '%tfgpu cpumem on',
      '%tfgpu growth on',
      '%tfgpu limit 2GB --gpu 0',
      '%tfgpu limit 4GB --gpu 1',
      '%tfgpu virtual 2x2GB',
      '%tfgpu placement on'
    ].join('\n')
  );
  // the settings alone work too; nothing saved is the load line alone
  assert.equal(firstCellSource({ cpus: '2' }, SETTINGS), '%load_ext tfgpu_magic\n%tfgpu cpus 2');
  assert.equal(firstCellSource({ version: 1, settings: {} }, SETTINGS), '%load_ext tfgpu_magic');
  assert.equal(firstCellSource({ version: 1 }, SETTINGS), '%load_ext tfgpu_magic');
  assert.deepEqual(settingLines(checkSettings({ placement: 'off', cpus: '4' }, SETTINGS).settings), ['cpus 4', 'placement off']);
  assert.ok(isFirstCellSource(source));
  assert.ok(isFirstCellSource('%load_ext tfgpu_magic'));
  assert.ok(!isFirstCellSource('%load_ext tfgpu_magic\nimport tensorflow as tf'));
  assert.ok(!isFirstCellSource('import os'));
});

test('a value holding a control character is refused: the first cell can never get a line of its own', () => {
  // What a received notebook could carry to turn its metadata into code (issue 30, item 3).
  const cases = [
    [{ visible: '0\nimport os' }, 'visible', '0\\nimport os', '\\n'],
    [{ cpus: '2\rimport os' }, 'cpus', '2\\rimport os', '\\r'],
    [{ growth: 'on\u2028import os' }, 'growth', 'on\\u2028import os', '\\u2028'],
    [{ placement: 'on\u2029x' }, 'placement', 'on\\u2029x', '\\u2029'],
    [{ cpumem: 'on\u0085x' }, 'cpumem', 'on\\u0085x', '\\u0085'], // NEL, a line break to str.splitlines
    [{ visible: '0\u001b]0;title\u0007' }, 'visible', '0\\u001b]0;title\\u0007', '\\u001b'],
    [{ limit: ['2GB --gpu 0', '4GB --gpu 1\n!rm -rf x'] }, 'limit', '4GB --gpu 1\\n!rm -rf x', '\\n'],
    [{ virtual: '2x2GB\t--gpu 0' }, 'virtual', '2x2GB\\t--gpu 0', '\\t']
  ];
  for (const [settings, name, shown, char] of cases) {
    const checked = checkSettings(settings, SETTINGS);
    assert.equal(checked.ok, false, JSON.stringify(settings));
    assert.equal(
      checked.message,
      `saved ${name} is "${shown}": it holds a control character (${char}); each value is one line, the text after \`%tfgpu ${name}\``
    );
    assert.doesNotMatch(checked.message, /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/); // shown escaped
    const read = readSaved({ version: 1, apply_on_start: true, settings }, SETTINGS);
    assert.equal(read.kind, 'invalid');
    assert.equal(read.message, checked.message);
    // Whatever it is given, the first cell is %load_ext and %tfgpu lines only, none with such a character.
    const source = firstCellSource({ version: 1, settings }, SETTINGS);
    assert.equal(source, '%load_ext tfgpu_magic');
    assert.doesNotMatch(source, /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u2028\u2029]/);
  }
  // Spaces around a value are trimmed (a trailing newline among them), not refused; a space inside is a value's.
  assert.deepEqual(checkSettings({ cpus: '2\n', limit: '2GB --gpu 0' }, SETTINGS), {
    ok: true, settings: { cpus: '2', limit: '2GB --gpu 0' } });
  // A value with {expr} or $name is only text to the sidebar: the kernel's check decides (and %tfgpu expands neither).
  assert.equal(checkSettings({ cpus: "{__import__('os').getpid()}" }, SETTINGS).ok, true);
  assert.equal(firstCellSource({ cpus: '{x}' }, SETTINGS).split('\n').length, 2);
});

// -- the settings there are, as the data names them ------------------------------------------------------

test('the setting words come in the kernel\'s order, with which take one value per GPU and what an input shows', () => {
  assert.deepEqual(SETTINGS.map(word => word.name), [
    'visible', 'cpus', 'cpumem', 'allocator', 'growth', 'limit', 'virtual', 'placement'
  ]);
  assert.deepEqual(SETTINGS.filter(word => word.perGpu).map(word => word.name), ['limit', 'virtual']);
  assert.deepEqual(SETTINGS[5], { name: 'limit', perGpu: true, placeholder: '40% / 2GB' }); // other keys left out
});

test('setting words of another shape are left out; none at all is null (an older kernel or server)', () => {
  assert.equal(readSettingWords(undefined), null);
  assert.equal(readSettingWords({ name: 'cpus' }), null);
  assert.equal(readSettingWords([]), null);
  assert.deepEqual(
    readSettingWords([
      { name: 'cpus', per_gpu: false, placeholder: '4', usage: 'later keys are ignored' },
      { name: 'cpus', per_gpu: true }, // twice: the first counts
      { name: 'x\nimport os', per_gpu: false }, // a name goes into %tfgpu lines and ids: one word only
      { name: 'Limit' },
      { name: '' },
      { per_gpu: true },
      'growth',
      null,
      { name: 'memo', per_gpu: 'yes', placeholder: 7 }
    ]),
    [
      { name: 'cpus', perGpu: false, placeholder: '4' },
      { name: 'memo', perGpu: false, placeholder: '' }
    ]
  );
});

test('the settings are read with the words the data gives: a registry with another setting reads it', () => {
  const more = readSettingWords([...fixture('setting_words.json'), { name: 'memo', per_gpu: true, placeholder: 'x' }]);
  const read = readSaved({ settings: { memo: ['a --gpu 0', 'b --gpu 1'], cpus: '2' } }, more);
  assert.equal(read.kind, 'ok');
  assert.deepEqual(Object.keys(read.saved.settings), ['cpus', 'memo']); // the words' order
  assert.equal(readSaved({ settings: { memo: 'a' } }, SETTINGS).message,
    'unknown saved setting "memo"; valid: visible, cpus, cpumem, allocator, growth, limit, virtual, placement');
  assert.deepEqual(settingsFromEditor({ memo: 'a; b', cpus: '1' }, more), { cpus: '1', memo: ['a', 'b'] });
  assert.equal(firstCellSource({ memo: 'a' }, more), '%load_ext tfgpu_magic\n%tfgpu memo a');
  // A per-GPU list is per-GPU because the words say so.
  const fewer = readSettingWords([{ name: 'limit', per_gpu: false }]);
  assert.equal(checkSettings({ limit: ['1GB --gpu 0', '2GB --gpu 1'] }, fewer).ok, false);
});

test('before any words came, a notebook with saved settings waits; one without has none, a newer one says so', () => {
  assert.deepEqual(readSaved({ version: 1, settings: { cpus: '2' } }, null),
    { kind: 'waiting', message: 'waiting for the server to name the settings' });
  assert.deepEqual(readSaved(undefined, null), { kind: 'none' });
  assert.equal(readSaved({ version: 2, settings: {} }, null).kind, 'newer');
  assert.equal(readSaved({ apply_on_start: 'yes' }, null).kind, 'invalid');
  // what the kernel refused cannot be offered again, nor a kernel's request read, before that
  assert.equal(refusedView({ refused: [], wanted: { cpus: '2' } }, null).wanted, null);
  assert.equal(parseKernelRequest({ type: 'request', action: 'restart-and-apply', settings: { cpus: '2' } }, null), null);
});

// -- the silent apply ------------------------------------------------------------------------------------

test('applyCode passes the document as a JSON string literal that Python reads as the same JSON', () => {
  const doc = { version: 1, apply_on_start: true, settings: { cpus: '3', limit: ['2GB --gpu 0'], visible: 'a"b\\c\n' } };
  const code = applyCode(doc);
  const call = code.split('\n').find(line => line.startsWith('    _tfgpu_installed().apply_json('));
  assert.ok(call && call.endsWith(')'), code);
  const literal = call.slice('    _tfgpu_installed().apply_json('.length, -1);
  assert.deepEqual(JSON.parse(JSON.parse(literal)), doc);
  assert.ok(!literal.includes('\n'), 'one line');
  assert.equal(APPLY_USER_EXPRESSION, "__import__('sys').modules[\"tfgpu_magic.ipython.apply\"].last_result()");
});

test('the apply code never imports from the notebook folder: sys.path without it for the whole call, then restored', () => {
  const code = applyCode({ settings: { cpus: '2' } });
  const call = code.indexOf('_tfgpu_installed().apply_json(');
  const cleared = code.indexOf('(p in ("", ".") or _tfgpu_os.path.realpath(p) == _tfgpu_here)');
  assert.ok(cleared > 0 && cleared < call, code);
  assert.ok(code.includes('importlib.machinery.PathFinder.find_spec("tfgpu_magic", sys.path)'), code);
  assert.ok(!code.includes('__import__('), 'no plain import, which would search the notebook folder first');
  assert.ok(code.includes('finally:\n    _tfgpu_sys.path[:] = _tfgpu_path + '), code);
  assert.ok(code.trimEnd().endsWith('del _tfgpu_installed, _tfgpu_os, _tfgpu_sys, _tfgpu_path, _tfgpu_here'), code);
});

const okReply = result => ({
  status: 'ok',
  execution_count: 0,
  user_expressions: { tfgpu: { status: 'ok', data: { 'text/plain': '{...}', 'application/json': result }, metadata: {} } }
});

test('an ok reply gives the kernel result', () => {
  const reply = parseApplyReply(
    okReply({
      ok: true,
      message: null,
      outcomes: [
        { setting: 'cpus', asked: '3', status: 'applied', detail: '3 logical CPUs', calls: [] },
        { setting: 'growth', asked: 'on', status: 'pending', detail: 'applied when TensorFlow is imported' }
      ],
      placement: 'on'
    })
  );
  assert.deepEqual(reply, {
    kind: 'result',
    ok: true,
    message: null,
    outcomes: [
      { setting: 'cpus', asked: '3', status: 'applied', detail: '3 logical CPUs' },
      { setting: 'growth', asked: 'on', status: 'pending', detail: 'applied when TensorFlow is imported' }
    ],
    placement: 'on',
    notApplied: [],
    reason: null
  });
  const view = applyStatusView({ kind: 'done', reply, afterRestart: false, kernelName: 'Python 3' }, plainTrans, WORDS);
  assert.deepEqual(view, {
    text: 'Applied at kernel start: cpus 3 → applied (3 logical CPUs); growth on → waiting for import; placement on',
    level: 'ok',
    retry: false
  });
  const after = applyStatusView({ kind: 'done', reply, afterRestart: true, kernelName: 'Python 3' });
  assert.match(after.text, /^Kernel restarted; saved settings applied: cpus 3 → applied/);
});

test('a refused set shows the kernel message and applied nothing', () => {
  const reply = parseApplyReply(
    okReply({ ok: false, message: 'tfgpu: cpus is "x": expected a count', outcomes: [], placement: null })
  );
  assert.deepEqual(reply, {
    kind: 'result',
    ok: false,
    message: 'tfgpu: cpus is "x": expected a count',
    outcomes: [],
    placement: null,
    notApplied: [],
    reason: null
  });
  const view = applyStatusView({ kind: 'done', reply, afterRestart: false, kernelName: '' });
  assert.equal(view.level, 'error');
  assert.equal(view.text, 'Saved settings refused at kernel start, none applied: tfgpu: cpus is "x": expected a count');
});

test('refused half way after TensorFlow was imported: what took effect and what did not, never "none applied"', () => {
  const reply = parseApplyReply(
    okReply({
      ok: false,
      message: 'tfgpu: TensorFlow refused `%tfgpu growth on`',
      outcomes: [{ setting: 'cpus', asked: '3', status: 'applied', detail: '3 logical CPUs' }],
      not_applied: ['growth'],
      placement: null
    })
  );
  assert.deepEqual(reply.notApplied, ['growth']);
  const view = applyStatusView({ kind: 'done', reply, afterRestart: false, kernelName: '' });
  assert.equal(view.level, 'error');
  assert.equal(
    view.text,
    'Saved settings partly applied at kernel start: cpus 3 → applied (3 logical CPUs) took effect; not applied: growth, ' +
      'because tfgpu: TensorFlow refused `%tfgpu growth on`'
  );
  assert.ok(!view.text.includes('none applied'));
});

test('ModuleNotFoundError (and ImportError) mean tfgpu_magic is not installed in the kernel', () => {
  for (const ename of ['ModuleNotFoundError', 'ImportError']) {
    const reply = parseApplyReply({
      status: 'error',
      ename,
      evalue: "No module named 'tfgpu_magic'",
      traceback: [],
      user_expressions: {}
    });
    assert.equal(reply.kind, 'not-installed');
    const view = applyStatusView({ kind: 'done', reply, afterRestart: false, kernelName: 'Python 3 (tf-env)' });
    assert.equal(
      view.text,
      "tfgpu_magic is not installed in this kernel's environment (Python 3 (tf-env)): run `%pip install tfgpu_magic` in a cell of this notebook, then restart the kernel"
    );
    assert.equal(view.retry, false);
  }
});

test('abort, KeyboardInterrupt and a canceled future are an interruption with Try again', () => {
  for (const content of [
    { status: 'abort' },
    { status: 'aborted' },
    { status: 'error', ename: 'KeyboardInterrupt', evalue: '', traceback: [] },
    null,
    undefined
  ]) {
    const reply = parseApplyReply(content);
    assert.deepEqual(reply, { kind: 'interrupted' }, JSON.stringify(content));
    const view = applyStatusView({ kind: 'done', reply, afterRestart: false, kernelName: '' });
    assert.deepEqual(view, { text: 'applying the saved settings was interrupted', level: 'warn', retry: true });
  }
});

test('other errors say what the kernel said', () => {
  assert.deepEqual(parseApplyReply({ status: 'error', ename: 'SyntaxError', evalue: 'invalid syntax' }), {
    kind: 'error',
    message: 'SyntaxError: invalid syntax'
  });
  // an expression that failed (an older tfgpu_magic without last_result)
  assert.deepEqual(
    parseApplyReply({
      status: 'ok',
      user_expressions: { tfgpu: { status: 'error', ename: 'AttributeError', evalue: "no attribute 'last_result'" } }
    }),
    { kind: 'error', message: "AttributeError: no attribute 'last_result'" }
  );
  assert.equal(parseApplyReply({ status: 'ok', user_expressions: {} }).kind, 'error');
  assert.equal(
    parseApplyReply({ status: 'ok', user_expressions: { tfgpu: { status: 'ok', data: { 'text/plain': "{'ok': True}" } } } }).kind,
    'error'
  );
  const view = applyStatusView({ kind: 'done', reply: { kind: 'error', message: 'X: y' }, afterRestart: false, kernelName: '' });
  assert.deepEqual(view, { text: 'applying the saved settings failed: X: y', level: 'error', retry: true });
});

test('apply states: none, applying, skipped', () => {
  assert.equal(applyStatusView(null), null);
  assert.equal(applyStatusView({ kind: 'applying', afterRestart: false }).text, 'Applying the saved settings…');
  assert.equal(applyStatusView({ kind: 'skipped', message: 'saved by a newer tfgpu_magic (version 2); this one reads version 1' }).text,
    'Saved settings not applied at kernel start: saved by a newer tfgpu_magic (version 2); this one reads version 1');
  assert.equal(outcomesText([], null), '');
  assert.equal(outcomesText([], 'off'), 'placement off');
});

test("a waiting apply shows the kernel's latest progress line, and Cancel", () => {
  const line = 'tfgpu: waiting for GPUs with >= 30.0 GiB free: GPU 0 has 2.0 GiB free; 3 s of 60 s\n';
  assert.equal(waitProgress(line), 'waiting for GPUs with >= 30.0 GiB free: GPU 0 has 2.0 GiB free; 3 s of 60 s');
  // Several lines in one stream message: the latest; other output is not progress.
  assert.equal(waitProgress(`${line}tfgpu: waiting ...; 4 s of 60 s\n`), 'waiting ...; 4 s of 60 s');
  for (const text of ['hello\n', '', 'tfgpu:', 'tfgpu: \n', ' xtfgpu: no\n', null, 3]) {
    assert.equal(waitProgress(text), null, JSON.stringify(text));
  }
  const applying = { kind: 'applying', afterRestart: false, settings: { visible: 'auto --wait 60s' } };
  assert.deepEqual(applyStatusView(applying), { text: 'Applying the saved settings…', level: 'info', retry: false });
  const waiting = { ...applying, progress: 'waiting for GPUs ...; 3 s of 60 s' };
  assert.deepEqual(applyStatusView(waiting), {
    text: 'Waiting to apply the saved settings; cells run once it ends:',
    level: 'info',
    retry: false,
    progress: 'waiting for GPUs ...; 3 s of 60 s',
    cancel: true,
    cancelling: false
  });
  assert.equal(applyStatusView({ ...waiting, cancelling: true }).cancelling, true);
});

test('a cancelled apply says so, with the kernel\'s words, and offers Try again', () => {
  const interrupted = { kind: 'result', ok: false, outcomes: [], placement: null, notApplied: [], reason: null,
    message: 'tfgpu: visible auto --wait was interrupted while waiting for a GPU; nothing changed' };
  const done = { kind: 'done', reply: interrupted, afterRestart: false, kernelName: 'Python 3', cancelled: true };
  assert.deepEqual(applyStatusView(done), {
    text: `Cancelled; saved settings not applied: ${interrupted.message}`, level: 'warn', retry: true });
  assert.deepEqual(applyStatusView({ ...done, reply: { kind: 'interrupted' } }), {
    text: 'Cancelled; saved settings not applied: interrupted', level: 'warn', retry: true });
  // The wait ended before the interrupt: what was applied is said as always.
  const ok = { kind: 'result', ok: true, message: null, placement: null, notApplied: [], outcomes: [] };
  assert.match(applyStatusView({ ...done, reply: ok }).text, /^Applied at kernel start/);
  // Not cancelled by the user: the kernel's refusal as before.
  assert.match(applyStatusView({ ...done, cancelled: false }).text, /^Saved settings refused at kernel start/);
});

test('saved settings edited since the kernel started', () => {
  const given = { cpus: '3', placement: 'on' };
  const state = { kind: 'done', reply: { kind: 'interrupted' }, afterRestart: false, kernelName: '', settings: given };
  assert.equal(savedChangedSince(state, { placement: 'on', cpus: '3' }), false); // the same, in another key order
  assert.equal(savedChangedSince(state, { cpus: '2', placement: 'on' }), true);
  assert.equal(savedChangedSince(state, null), true); // removed since
  assert.equal(savedChangedSince(null, given), false); // nothing was applied: nothing to compare
  assert.equal(savedChangedSince({ kind: 'skipped', message: 'x' }, given), false);
});

// -- refusals and the comm's answers ---------------------------------------------------------------------

test('refused rows and what to apply instead', () => {
  const kernel = {
    refused: [{ setting: 'cpus', asked: '4', message: 'tfgpu: cpus 4 refused: the runtime has started' }, 'junk'],
    wanted: { cpus: '4', growth: 'on' }
  };
  const view = refusedView(kernel, SETTINGS);
  assert.deepEqual(view.rows, [
    {
      key: 'refused-cpus-0',
      setting: 'cpus',
      asked: '4',
      message: 'tfgpu: cpus 4 refused: the runtime has started',
      command: '%tfgpu cpus 4',
      reason: 'cpus 4 refused: the runtime has started',
      details: ''
    }
  ]);
  assert.deepEqual(view.wanted, { cpus: '4', growth: 'on' });
  assert.deepEqual(refusedView(null, SETTINGS), { rows: [], wanted: null });
  assert.deepEqual(refusedView({ refused: [], wanted: {} }, SETTINGS), { rows: [], wanted: {} });
  // a wanted of the wrong shape is not offered
  assert.equal(refusedView({ refused: kernel.refused, wanted: { cpus: 4 } }, SETTINGS).wanted, null);
  // a refusal without its message still says something
  assert.equal(refusedView({ refused: [{ setting: 'growth', asked: 'on' }] }, SETTINGS).rows[0].message,
    'growth on was refused: the runtime has started');
});

test('validated answers and kernel requests; other messages are not theirs', () => {
  assert.deepEqual(parseValidated({ type: 'validated', id: 3, ok: true, errors: {} }), {
    id: 3,
    ok: true,
    errors: {},
    unchecked: {}
  });
  assert.deepEqual(
    parseValidated({ type: 'validated', id: 4, ok: false, errors: { cpus: 'tfgpu: bad cpus', growth: 7 } }),
    { id: 4, ok: false, errors: { cpus: 'tfgpu: bad cpus' }, unchecked: {} }
  );
  // Values taken as given (NVML cannot list the GPUs) come with the kernel's words; a refused one is not also that.
  assert.deepEqual(
    parseValidated({
      type: 'validated',
      id: 6,
      ok: false,
      errors: { cpus: 'tfgpu: bad cpus' },
      unchecked: { visible: 'GPU 9 not checked: NVML is not installed', cpus: 'x', limit: 3 }
    }).unchecked,
    { visible: 'GPU 9 not checked: NVML is not installed' }
  );
  // ok with errors is not ok
  assert.equal(parseValidated({ type: 'validated', id: 5, ok: true, errors: { cpus: 'x' } }).ok, false);
  assert.equal(parseValidated({ type: 'state', sections: {} }), null);
  assert.equal(parseValidated({ type: 'validated' }), null);
  assert.deepEqual(parseKernelRequest({ type: 'request', action: 'restart-and-apply', settings: { cpus: '2' } }, SETTINGS), {
    action: 'restart-and-apply',
    settings: { cpus: '2' }
  });
  assert.equal(parseKernelRequest({ type: 'request', action: 'dance', settings: {} }, SETTINGS), null);
  assert.equal(parseKernelRequest({ type: 'request', action: 'restart-and-apply', settings: { nope: '1' } }, SETTINGS), null);
  assert.equal(parseKernelRequest({ type: 'changes', sections: {} }, SETTINGS), null);
});

test('a kernel that had run cells already is not a refusal: neutral, with Restart kernel and apply', () => {
  const message =
    'tfgpu: this kernel has run cells already, so the saved settings were not applied now: they apply at its next start (Restart kernel and apply)';
  const reply = parseApplyReply(okReply({ ok: false, message, outcomes: [], placement: null, reason: 'ran_cells' }));
  assert.equal(reply.kind, 'result');
  assert.equal(reply.reason, 'ran_cells');
  for (const consented of [false, true]) {
    const view = applyStatusView({ kind: 'done', reply, afterRestart: false, kernelName: '', consented });
    assert.equal(view.level, 'info');
    assert.equal(view.restart, true);
    assert.equal(view.retry, false);
    assert.match(view.text, /has run cells already/);
    assert.doesNotMatch(view.text, /refused/);
  }
  // Another reason, or none (an older kernel), is what it was: a refusal in red.
  const refused = parseApplyReply(okReply({ ok: false, message: 'tfgpu: cpus is "x"', outcomes: [], placement: null, reason: 7 }));
  assert.equal(refused.reason, null);
  const view = applyStatusView({ kind: 'done', reply: refused, afterRestart: false, kernelName: '' });
  assert.equal(view.level, 'error');
  assert.ok(!view.restart);
});

test("a refusal box names the magic's line and one reason; the long call goes to its details", () => {
  const message =
    "tfgpu: `%tfgpu limit 40%` is too late: TensorFlow's runtime is already initialized and limit can no longer change " +
    "(it would need tf.config.set_logical_device_configuration(gpus[0], [tf.config.LogicalDeviceConfiguration(memory_limit=32768)])); " +
    'restart the kernel and run `%tfgpu limit 40%` before the first TensorFlow operation';
  const [row] = refusedView({ refused: [{ setting: 'limit', asked: '40%', message }] }, SETTINGS).rows;
  assert.equal(row.command, '%tfgpu limit 40%');
  assert.equal(row.reason, "too late: TensorFlow's runtime is already initialized and limit can no longer change");
  assert.equal(row.details, message);
  assert.doesNotMatch(row.reason, /tf\.config/);
  assert.deepEqual(refusalParts('short reason', '%tfgpu cpus 2'), { reason: 'short reason', details: '' });
  assert.deepEqual(refusalParts('`%tfgpu cpus 2` is too late; restart', '%tfgpu cpus 2'), {
    reason: 'too late',
    details: '`%tfgpu cpus 2` is too late; restart'
  });
});
