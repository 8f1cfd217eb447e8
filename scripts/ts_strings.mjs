// The sidebar's words, read with the TypeScript compiler (not regexes, which miss a string split over lines or a
// call inside a template): every trans.__ / _n / _p / _np call's messages, the calls whose message is not a plain
// string literal (gettext can only extract literals), and string literals that reach the page without the
// translator. Used by scripts/catalogue.py (update, check) and tests/frontend/test_translations.py.
//
//   node scripts/ts_strings.mjs ROOT   ->  JSON on stdout: {messages, nonLiteral, untranslated}
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';

// typescript from this checkout's node_modules, wherever ROOT is (tests run this on a temporary copy).
const require = createRequire(import.meta.url);
const ts = require('typescript');

const root = path.resolve(process.argv[2] ?? '.');
const srcDir = path.join(root, 'labextension', 'src');

function tsFiles(dir) {
  const out = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      out.push(...tsFiles(full));
    } else if (/\.tsx?$/.test(entry.name) && !entry.name.endsWith('.d.ts')) {
      out.push(full);
    }
  }
  return out.sort();
}

// Which arguments of each translator method are messages: [context, singular, plural] positions (-1: none).
const METHODS = {
  __: { ctx: -1, one: 0, many: -1 },
  gettext: { ctx: -1, one: 0, many: -1 },
  _n: { ctx: -1, one: 0, many: 1 },
  ngettext: { ctx: -1, one: 0, many: 1 },
  _p: { ctx: 0, one: 1, many: -1 },
  pgettext: { ctx: 0, one: 1, many: -1 },
  _np: { ctx: 0, one: 1, many: 2 },
  npgettext: { ctx: 0, one: 1, many: 2 }
};

// Where a string is shown to a person: DOM properties, attributes, the render helpers' text arguments, and the
// properties of the objects JupyterLab shows (commands' label/caption, Dialog's title/body/buttons, ...).
const TEXT_PROPERTIES = new Set(['textContent', 'innerText', 'title', 'placeholder', 'label', 'caption', 'ariaLabel', 'alt']);
const TEXT_ATTRIBUTES = new Set(['aria-label', 'aria-description', 'aria-roledescription', 'aria-valuetext', 'title', 'placeholder', 'alt']);
const OBJECT_KEYS = new Set(['label', 'caption', 'title', 'body', 'placeholder', 'ariaLabel', 'text', 'message', 'tooltip', 'usage']);
// helper name -> positions of its text arguments (labextension/src/render.ts and their users)
const TEXT_HELPERS = { el: [2, 3], line: [0], subheading: [0], createTextNode: [0] };
const NOTIFY = new Set(['info', 'warning', 'error', 'success', 'emit', 'promise']);

/**
 * Strings that are not words to translate, each with why. A literal counts as words when it holds a run of two or
 * more Latin letters once these are taken out.
 */
const ALLOWED = [
  /%tfgpu\b[^'"`]*/g, //        magics are typed as they are, in every language
  /\btfgpu[-_:][\w-]*/g, //     CSS classes, DOM ids, command ids
  /\bjp-[\w-]*/g, //            JupyterLab's CSS classes
  /\b(?:KiB|MiB|GiB|TiB|ms)\b/g, // units stay as typed
  /\b(?:GPU|GPUs|CPU|CUDA|NVML|MIG|PID|TF|TensorFlow|XLA)\b/g // names, the same in every language
];

function words(text) {
  let rest = text;
  for (const pattern of ALLOWED) {
    rest = rest.replace(pattern, ' ');
  }
  return /[A-Za-z]{2,}/.test(rest);
}

const messages = [];
const nonLiteral = [];
const untranslated = [];

function isTranslatorCall(node) {
  if (!ts.isCallExpression(node) || !ts.isPropertyAccessExpression(node.expression)) {
    return null;
  }
  const name = node.expression.name.text;
  if (!Object.hasOwn(METHODS, name)) {
    return null;
  }
  // trans, this._trans, this.trans, props.trans, ...: the receiver's name says it is a TranslationBundle
  const receiver = node.expression.expression.getText();
  return /trans/i.test(receiver) ? name : null;
}

function literalText(node) {
  return ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node) ? node.text : null;
}

/** The constant pieces of an expression that would reach the page as they are (not through a call). */
function leaves(node, out = []) {
  if (!node) {
    return out;
  }
  if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) {
    out.push({ node, text: node.text });
  } else if (ts.isTemplateExpression(node)) {
    out.push({ node, text: [node.head.text, ...node.templateSpans.map(s => s.literal.text)].join(' ') });
    for (const span of node.templateSpans) {
      leaves(span.expression, out);
    }
  } else if (ts.isParenthesizedExpression(node) || ts.isAsExpression(node) || ts.isNonNullExpression(node)) {
    leaves(node.expression, out);
  } else if (ts.isConditionalExpression(node)) {
    leaves(node.whenTrue, out);
    leaves(node.whenFalse, out);
  } else if (ts.isBinaryExpression(node)) {
    const op = node.operatorToken.kind;
    if (op === ts.SyntaxKind.PlusToken || op === ts.SyntaxKind.BarBarToken || op === ts.SyntaxKind.QuestionQuestionToken) {
      leaves(node.left, out);
      leaves(node.right, out);
    }
  } else if (ts.isArrayLiteralExpression(node)) {
    for (const element of node.elements) {
      leaves(element, out);
    }
  }
  return out;
}

function where(sf, node) {
  const { line } = sf.getLineAndCharacterOfPosition(node.getStart(sf));
  return { file: path.relative(root, sf.fileName).split(path.sep).join('/'), line: line + 1 };
}

function sink(sf, expr, how) {
  for (const leaf of leaves(expr)) {
    if (words(leaf.text)) {
      untranslated.push({ ...where(sf, leaf.node), text: leaf.text, how });
    }
  }
}

function visit(sf, node) {
  const method = isTranslatorCall(node);
  if (method) {
    const spec = METHODS[method];
    const entry = { ...where(sf, node), method };
    let ok = true;
    for (const [key, pos] of [['context', spec.ctx], ['msgid', spec.one], ['plural', spec.many]]) {
      if (pos < 0) {
        continue;
      }
      const arg = node.arguments[pos];
      const text = arg ? literalText(arg) : null;
      if (text === null) {
        ok = false;
        nonLiteral.push({ ...where(sf, arg ?? node), method, argument: pos, code: arg ? arg.getText(sf) : '' });
      } else {
        entry[key] = text;
      }
    }
    if (ok) {
      messages.push(entry);
    }
    // the other arguments (%1, %2) are values: not looked into for words
    return;
  }
  if (ts.isBinaryExpression(node) && node.operatorToken.kind === ts.SyntaxKind.EqualsToken) {
    const target = node.left;
    if (ts.isPropertyAccessExpression(target) && TEXT_PROPERTIES.has(target.name.text)) {
      sink(sf, node.right, `.${target.name.text} =`);
    }
  }
  if (ts.isCallExpression(node)) {
    const callee = node.expression;
    const name = ts.isIdentifier(callee) ? callee.text : ts.isPropertyAccessExpression(callee) ? callee.name.text : '';
    if (name === 'setAttribute' && node.arguments.length >= 2) {
      const attr = literalText(node.arguments[0]);
      if (attr !== null && TEXT_ATTRIBUTES.has(attr)) {
        sink(sf, node.arguments[1], `setAttribute('${attr}')`);
      }
    }
    if (Object.hasOwn(TEXT_HELPERS, name)) {
      for (const pos of TEXT_HELPERS[name]) {
        sink(sf, node.arguments[pos], `${name}() argument ${pos + 1}`);
      }
    }
    if (ts.isPropertyAccessExpression(callee) && NOTIFY.has(name) && /Notification/.test(callee.expression.getText(sf))) {
      sink(sf, node.arguments[0], `Notification.${name}()`);
    }
  }
  if (ts.isPropertyAssignment(node) && (ts.isIdentifier(node.name) || ts.isStringLiteral(node.name)) && OBJECT_KEYS.has(node.name.text)) {
    sink(sf, node.initializer, `{ ${node.name.text}: }`);
  }
  ts.forEachChild(node, child => visit(sf, child));
}

for (const file of tsFiles(srcDir)) {
  const sf = ts.createSourceFile(file, fs.readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
  visit(sf, sf);
}

process.stdout.write(JSON.stringify({ messages, nonLiteral, untranslated }, null, 1) + '\n');
