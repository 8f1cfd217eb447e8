// A live panel saved in a notebook: found by its output's bundle, so its own text can show where its widget cannot.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { isWidgetError, panelFallbackText } from '../../lib/model/index.js';

const VIEW = { 'application/vnd.jupyter.widget-view+json': { model_id: 'gone', version_major: 2, version_minor: 0 } };

test("a tfgpu panel's output gives its text; another widget, or a plain output, gives none", () => {
  const panel = { ...VIEW, 'text/plain': 'tfgpu live panel. Run it again. ', 'text/html': "<div class='tfgpu-panel-fallback'>x</div>" };
  assert.equal(panelFallbackText(panel), 'tfgpu live panel. Run it again.');
  assert.equal(panelFallbackText({ ...VIEW, 'text/plain': 'IntSlider(value=3)' }), null);
  assert.equal(panelFallbackText({ 'text/plain': 'x', 'text/html': "<div class='tfgpu-panel-fallback'>x</div>" }), null);
  assert.equal(panelFallbackText({ ...panel, 'text/plain': ' ' }), null);
  assert.equal(panelFallbackText(null), null);
  assert.equal(panelFallbackText('text'), null);
});

test("ipywidgets' error lines are recognised, its loading line is not", () => {
  assert.ok(isWidgetError('Error displaying widget: model not found'));
  assert.ok(isWidgetError('Error displaying widget'));
  assert.ok(!isWidgetError('Loading widget...'));
  assert.ok(!isWidgetError(null));
});
