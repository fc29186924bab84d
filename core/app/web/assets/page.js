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
