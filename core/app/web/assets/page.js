// What every page's script shares: errors shown in #errors (the browser tests read it), el() to
// build elements (values reach a page only as text nodes and attributes, never as HTML), fmt().
'use strict';
const report = text => {
  document.getElementById('errors').textContent += 'error: ' + text + '\n';
};
window.addEventListener('error', e => report(e.message));
window.addEventListener('unhandledrejection', e => report(e.reason && e.reason.message || e.reason));
const el = (tag, attrs = {}, ...kids) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  for (const k of kids) e.append(k ?? '');
  return e;
};
// A redraw (`build`) that replaces the element with the keyboard focus gives the focus, caret and
// selection to its replacement: the element `key` names (a selector: by default its id, else its
// aria-label, href, name or class inside the nearest element with an id or a data-run, data-study,
// data-metric or data-variant), so a page that redraws while someone types or ticks keeps up with them.
const focusKey = e => {
  if (e.id) return '#' + CSS.escape(e.id);
  const attr = ['aria-label', 'href', 'name', 'class'].find(a => e.getAttribute(a));
  const self = e.tagName.toLowerCase() + (attr ? `[${attr}="${CSS.escape(e.getAttribute(attr))}"]` : '');
  const scope = e.parentElement && e.parentElement.closest('[id],[data-run],[data-study],[data-metric],[data-variant]');
  if (!scope) return null;
  if (scope.id) return `#${CSS.escape(scope.id)} ${self}`;
  const data = ['run', 'study', 'metric', 'variant'].find(d => scope.dataset[d] !== undefined);
  return `[data-${data}="${CSS.escape(scope.dataset[data])}"] ${self}`;
};
function keepFocus(build, key = focusKey) {
  const a = document.activeElement, name = a && a !== document.body ? key(a) : null;
  const caret = name && typeof a.selectionStart === 'number' ? [a.selectionStart, a.selectionEnd] : null;
  const result = build();
  const b = name && !a.isConnected ? document.querySelector(name) : null;
  if (b) {
    b.focus({preventScroll: true});
    if (caret && typeof b.setSelectionRange === 'function') b.setSelectionRange(...caret);
  }
  return result;
}
const fmt = (x, d = 5) => x === null || x === undefined ? '' : Number(x).toPrecision(d).replace(/\.?0+(e|$)/, '$1');
// "1 run", "3 runs": a count and its noun.
const plural = (n, one, many = one + 's') => `${n} ${n === 1 ? one : many}`;
// A log axis's tick labels, in one notation for the whole axis: 1e-7 … 5e-5 where any tick is below
// 0.001 or from 1e5 up, else plain (0.002, 500); only the 1, 2 and 5 of each decade are written.
const logTick = (v, values) => {
  const mantissa = Math.round(v / 10 ** Math.floor(Math.log10(v)));
  if (![1, 2, 5].includes(mantissa)) return '';
  const exponent = values.some(x => x > 0 && (x < 1e-3 || x >= 1e5));
  return exponent ? v.toExponential(0).replace('e+', 'e') : String(Number(v.toPrecision(1)));
};
// A chart's y axis (Chart.js 3): a constant series spans ±5 % of its value, not Chart.js's ±1
// (around a small value that reads as 0), and the ticks are written as fmt() writes numbers
// (1e-9, not 0.000000001; on a log axis as logTick() writes them).
const yAxis = (options = {}) => Object.assign(
    {
      afterDataLimits(axis) {
        const {min, max} = axis.getMinMax(false);
        if (!Number.isFinite(min) || !Number.isFinite(max) || max - min > 1e-9 * Math.abs(max)) return;
        if (axis.type === 'logarithmic' && min > 0) {
          axis.min = min / 1.2;
          axis.max = max * 1.2;
        } else {
          const pad = max !== 0 ? Math.abs(max) * 0.05 : 1;
          axis.min = min - pad;
          axis.max = max + pad;
        }
      },
      ticks: {
        callback(v, i, ticks) {  // enough digits that neighbouring ticks differ (a narrow range: more than 4)
          const step = ticks.length > 1 ? Math.abs(ticks[1].value - ticks[0].value) : 0;
          const digits = step > 0 && v ? Math.ceil(Math.log10(Math.abs(v) / step)) + 1 : 4;
          if (this.type !== 'logarithmic') return fmt(v, Math.min(12, Math.max(4, digits)));
          return logTick(v, ticks.map(t => t.value));
        }
      }
    },
    options);
const COLORS =
    ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#17becf', '#7f7f7f', '#bcbd22'];
const alpha = (c, a) => c + Math.round(a * 255).toString(16).padStart(2, '0');  // '#rrggbb' with opacity a
// A setting as a reader writes it: TOML text without a string's quotes, and a float the store spells
// shortest (1e+01, 3e-04) as a plain number where one is short enough (10, 0.0003).
const setting = v => {
  if (typeof v !== 'string') return v ?? '';
  if (/^-?\d+(\.\d+)?e[+-]\d+$/.test(v) && Math.abs(Number(v)) >= 1e-6 && Math.abs(Number(v)) < 1e15)
    return String(Number(v));
  return v.replace(/^"(.*)"$/, '$1');
};
// Which way a metric is better, by its name: accuracies, F1s and throughputs up, losses and errors down.
const higherIsBetter = m => /(accuracy|f1|precision|recall|auc|images_per_s|r2)$/.test(m);
