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
const fmt = (x, d = 5) => x === null || x === undefined ? '' : Number(x).toPrecision(d).replace(/\.?0+(e|$)/, '$1');
// A chart's y axis (Chart.js 3): a constant series spans ±5 % of its value, not Chart.js's ±1
// (around a small value that reads as 0), and the ticks are written as fmt() writes numbers
// (1e-9, not 0.000000001; on a log axis only the 1, 2 and 5 of each decade).
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
        callback(v) {
          if (this.type !== 'logarithmic') return fmt(v, 4);
          const mantissa = Math.round(v / 10 ** Math.floor(Math.log10(v)));
          return [1, 2, 5].includes(mantissa) ? fmt(v, 2) : '';
        }
      }
    },
    options);
