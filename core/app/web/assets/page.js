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

// ---- Chart controls, shared by the run, compare and study pages: smoothing (EMA; the raw line stays,
// faint), the x axis (step, wall time, epoch where logged), zoom (drag across a chart; Shift+wheel; a
// double click or "reset zoom" undoes it), a metric search and pinning a chart to the top. A page
// gives each x-bound dataset a spec: Charts.line(canvas, panel, metric, config, specs), specs[i] for
// chart.data.datasets[i]: {kind: 'line'|'raw'|'band'|'seed', points: [{step, time, epoch, y}]} or
// {kind: 'ref', y} (a horizontal reference across the drawn x range). The settings live in the address.
// A chart's x axis: one x value (a one-point chart) is its one tick, not -1 … 1 around it.
const xAxis = () => ({
  type: 'linear',
  title: {display: true, text: 'step'},
  afterBuildTicks(axis) {
    const {min, max} = axis.getMinMax(false);
    if (Number.isFinite(min) && min === max) axis.ticks = [{value: min}];
  }
});
// The options every curve chart shares (Chart.js 3, points given as {x, y}): `legend`, the
// legend's label options (false: no legend), and `y`, the y axis. A line with more points than 4 a
// pixel in the x range shown is drawn thinned, each pixel's first, last, least and greatest point
// (Chart.js's min-max decimation): 100,000 points draw as fast as a few thousand, and a zoom into a
// narrower range draws every point in it.
const curveOptions = (legend, y = yAxis()) => ({
  animation: false,
  maintainAspectRatio: false,
  parsing: false,
  normalized: true,
  interaction: {mode: 'nearest', intersect: false},
  plugins: {
    legend: legend ? {labels: Object.assign({boxWidth: 10}, legend)} : {display: false},
    decimation: {enabled: true, algorithm: 'min-max'}
  },
  scales: {x: xAxis(), y}
});
const Charts = (() => {
  const q = new URLSearchParams(location.search);
  const state = {
    smooth: Math.min(0.99, Math.max(0, Number(q.get('smooth')) || 0)),
    x: q.get('x') || 'step',
    search: q.get('search') || '',
    pinned: new Set((q.get('pin') || '').split(',').filter(s => s))
  };
  const TITLE = {step: 'step', time: 'wall time (s since the run started)', epoch: 'epoch'};
  const entries = [];
  // Each metric's zoom, [min, max] of x: a chart drawn again (a study that trains redraws every few
  // seconds) is drawn zoomed as it was. `dragging`: a drag across a chart is under way (live.js waits).
  const zooms = new Map();
  let pinnedBox = null, controls = null, dragging = false;
  function save() {
    if (location.protocol === 'file:') return;  // htm report's file: nothing to keep
    const u = new URLSearchParams(location.search);
    const put = (k, v) => v ? u.set(k, v) : u.delete(k);
    put('smooth', state.smooth ? String(state.smooth) : '');
    put('x', state.x === 'step' ? '' : state.x);
    put('search', state.search);
    put('pin', [...state.pinned].join(','));
    history.replaceState(null, '', '?' + u.toString().replace(/%2F/g, '/').replace(/%2C/g, ','));
  }
  // TensorBoard's smoothing: an exponential moving average, debiased at the start (each point's y).
  function ema(points, w) {
    const ys = new Float64Array(points.length);
    let last = 0;
    for (let k = 0; k < points.length; k++) {
      last = last * w + (1 - w) * points[k].y;
      ys[k] = last / (1 - w ** (k + 1));
    }
    return ys;
  }
  // The points on the current x axis (those that have it), with their y or `ys`'s.
  function xy(points, ys = null) {
    const out = [];
    for (let i = 0; i < points.length; i++) {
      const x = points[i][state.x];
      if (x !== null && x !== undefined) out.push({x, y: ys ? ys[i] : points[i].y});
    }
    return out;
  }
  // A dataset's points. Chart.js's decimation turns `data` into a getter of the thinned points while it
  // thins a line, and leaves it read-only when it stops (a zoom): such a property is made anew.
  function setPoints(d, data) {
    const own = Object.getOwnPropertyDescriptor(d, 'data');
    if (own && !own.set && !own.writable) delete d.data;
    d.data = data;
  }
  // The datasets' points for the current smoothing and x axis (a chart not yet drawn, or redrawn).
  function fill(datasets, specs) {
    let lo = Infinity, hi = -Infinity;
    datasets.forEach((d, i) => {
      const s = specs[i];
      if (!s || s.kind === 'ref') return;
      const smoothed = state.smooth > 0 && (s.kind === 'line' || s.kind === 'seed');
      const data = xy(s.points, smoothed ? ema(s.points, state.smooth) : null);
      setPoints(d, data);  // (read back, a thinned line's data is what was drawn: not these)
      if (s.kind === 'raw') d.hidden = state.smooth === 0;
      for (const p of data) lo = Math.min(lo, p.x), hi = Math.max(hi, p.x);
    });
    if (!(hi >= lo)) lo = 0, hi = 1;
    datasets.forEach((d, i) => {
      if (specs[i] && specs[i].kind === 'ref')
        setPoints(d, [{x: Math.min(lo, 0), y: specs[i].y}, {x: Math.max(hi, lo + 1), y: specs[i].y}]);
    });
  }
  function apply(entry) {
    if (!entry.chart) return;  // not drawn yet: it will be, with the settings of then
    fill(entry.chart.data.datasets, entry.specs);
    entry.chart.options.scales.x.title.text = TITLE[state.x];
    entry.chart.update('none');
  }
  // Every chart is drawn after the page first shows, those in view first, about 40 ms of drawing at a
  // time (Chart.js takes 10-60 ms a chart: drawn at once, a study's 40 would keep the page blank
  // for a second or two). The first time no chart waiting is in view, the page marks
  // 'htm-first-screen' (performance.mark; scripts/serve/draw.js reads it).
  let queue = [], waiting = [], scheduled = false, firstScreen = false, look = true;
  const inView = canvas => {
    const r = canvas.getBoundingClientRect();
    return r.width > 0 && r.bottom > 0 && r.top < innerHeight;
  };
  window.addEventListener('scroll', () => look = true, {passive: true});
  function drawQueued() {
    const until = performance.now() + 40;
    while (queue.length && performance.now() < until) {
      let i = look ? queue.findIndex(q => inView(q.canvas)) : -1;
      if (i < 0) {
        look = false;  // none in view: in page order until the next scroll
        if (!firstScreen) firstScreen = true, performance.mark('htm-first-screen');
        i = 0;
      }
      queue.splice(i, 1)[0].draw();
    }
    if (queue.length) return setTimeout(drawQueued, 0);
    if (!firstScreen) firstScreen = true, performance.mark('htm-first-screen');
    scheduled = false;
    waiting.splice(0).forEach(resolve => resolve());
  }
  // `draw` (which makes the chart on `canvas`) in the queue; the first waits for the page to show.
  function soon(canvas, draw) {
    queue.push({canvas, draw});
    look = true;
    if (!scheduled) scheduled = true, requestAnimationFrame(() => setTimeout(drawQueued, 0));
  }
  // Resolves once every chart asked for is drawn.
  const drawn = () => queue.length ? new Promise(resolve => waiting.push(resolve)) : Promise.resolve();
  function zoom(entry, min, max) {
    if (min === undefined)
      zooms.delete(entry.metric);
    else
      zooms.set(entry.metric, [min, max]);
    if (!entry.chart) return;
    const x = entry.chart.options.scales.x;
    if (min === undefined)
      delete x.min, delete x.max;
    else
      x.min = min, x.max = max;
    entry.panel.dataset.zoomed = min === undefined ? 'no' : 'yes';
    entry.chart.update('none');
  }
  function filter() {
    const words = state.search.toLowerCase().split(/\s+/).filter(w => w);
    let shown = 0;
    for (const e of entries) {
      e.panel.hidden = !words.every(w => e.metric.toLowerCase().includes(w));
      shown += !e.panel.hidden;
    }
    document.body.dataset.shownCharts = shown;
  }
  function pin(entry, on) {
    if (on)
      state.pinned.add(entry.metric);
    else
      state.pinned.delete(entry.metric);
    entry.button.textContent = on ? '★' : '☆';
    entry.panel.dataset.pinned = on ? 'yes' : 'no';
    if (pinnedBox) (on ? pinnedBox : entry.home).prepend(entry.panel);
    if (pinnedBox) pinnedBox.hidden = !pinnedBox.children.length;
  }
  // Drag across the plot to zoom into that x range; Shift+wheel zooms about the pointer.
  // The window's listener goes with the chart (entry.gone, aborted when the page is drawn again).
  function zoomable(entry) {
    const {chart} = entry, canvas = chart.canvas, box = canvas.parentNode;
    const band = el('div', {class: 'zoom-band', hidden: ''});
    box.append(band);
    entry.gone = new AbortController();
    let from = null;
    canvas.addEventListener('mousedown', e => {
      if (e.button !== 0) return;
      from = e.offsetX;
      dragging = true;
      Object.assign(band.style, {left: from + 'px', width: '0px'});
      band.hidden = false;
    });
    canvas.addEventListener('mousemove', e => {
      if (from === null) return;
      Object.assign(band.style, {left: Math.min(from, e.offsetX) + 'px', width: Math.abs(e.offsetX - from) + 'px'});
    });
    window.addEventListener('mouseup', e => {
      if (from === null) return;
      const to = e.clientX - canvas.getBoundingClientRect().left, a = Math.min(from, to), b = Math.max(from, to);
      from = null;
      dragging = false;
      band.hidden = true;
      if (b - a < 5) return;
      const scale = chart.scales.x;
      zoom(
          entry, scale.getValueForPixel(Math.max(a, chart.chartArea.left)),
          scale.getValueForPixel(Math.min(b, chart.chartArea.right)));
    }, {signal: entry.gone.signal});
    canvas.addEventListener('wheel', e => {
      if (!e.shiftKey) return;
      e.preventDefault();
      const delta = e.deltaY || e.deltaX;  // with Shift held, browsers turn the wheel sideways
      const scale = chart.scales.x, at = scale.getValueForPixel(e.offsetX), f = delta < 0 ? 0.8 : 1.25;
      zoom(entry, at - (at - scale.min) * f, at + (scale.max - at) * f);
    });
    canvas.addEventListener('dblclick', () => zoom(entry));
  }
  // A line chart drawn once, with the current settings: `config` as Chart.js takes it, its datasets'
  // points from `specs`; joined to the controls at once (or, as `entry`, by later() before its data
  // came), drawn soon after (soon(); drawn() says when).
  function line(canvas, panel, metric, config, specs, entry = null) {
    if (entry)
      entry.specs = specs;
    else
      entry = join({chart: null, panel, metric, specs});
    const draw = () => {
      fill(config.data.datasets, specs);
      const x = config.options.scales.x, kept = zooms.get(metric);
      x.title = {display: true, text: TITLE[state.x]};
      if (kept) [x.min, x.max] = kept;
      entry.chart = new Chart(canvas, config);
      panel.dataset.zoomed = kept ? 'yes' : 'no';
      zoomable(entry);
    };
    soon(canvas, draw);
    return entry;
  }
  // A panel whose chart comes later (line(..., entry)): searched and pinned meanwhile.
  const later = (panel, metric) => join({chart: null, panel, metric, specs: []});
  // A chart drawn by the page joins the controls, and is drawn again with their settings.
  function add(chart, panel, metric, specs) {
    const entry = join({chart, panel, metric, specs});
    zoomable(entry);
    apply(entry);
    if (zooms.has(metric)) zoom(entry, ...zooms.get(metric));
    return entry;
  }
  // Its panel gets a pin, and is shown or hidden by the search.
  function join(entry) {
    const button = el('button', {class: 'pin', type: 'button', title: 'pin to the top'}, '☆');
    Object.assign(entry, {button, home: entry.panel.parentNode});
    button.addEventListener('click', () => {
      pin(entry, !state.pinned.has(entry.metric));
      save();
    });
    entry.panel.querySelector('h3').append(button);
    entry.panel.dataset.zoomed = 'no';
    entries.push(entry);
    if (state.pinned.has(entry.metric)) pin(entry, true);
    filter();
    return entry;
  }
  // The bar above a page's charts: search, smoothing, x axis (`axes`: those the data has), reset
  // zoom, and `extra` controls of the page's own. Built once: a page drawn again (a study that trains)
  // calls it again, and keeps the same elements, so that what is being typed, the focus and the caret
  // stay; only the x axes offered and the extra controls (when they are other elements) change.
  function bar(container, axes, ...extra) {
    if (!axes.includes(state.x)) state.x = 'step';
    if (!controls || controls.container !== container) controls = build(container);
    const {axis, extras} = controls;
    if ([...axis.options].map(o => o.value).join() !== axes.join())
      axis.replaceChildren(...axes.map(a => el('option', {value: a}, TITLE[a])));
    axis.value = state.x;
    if (extra.length !== extras.children.length || extra.some((e, i) => extras.children[i] !== e))
      extras.replaceChildren(...extra);
  }
  function build(container) {
    if (pinnedBox) pinnedBox.remove();
    const search =
        el('input', {type: 'search', id: 'metric-search', placeholder: 'search metrics', value: state.search});
    search.addEventListener('input', () => {
      state.search = search.value.trim();
      filter();
      save();
    });
    const slider = el('input', {type: 'range', id: 'smoothing', min: 0, max: 0.99, step: 0.01, value: state.smooth});
    const shown = el('span', {class: 'muted'}, String(state.smooth));
    let queued = false;
    slider.addEventListener('input', () => {
      state.smooth = Number(slider.value);
      shown.textContent = slider.value;
      if (queued) return;
      queued = true;
      requestAnimationFrame(() => {
        queued = false;
        entries.forEach(apply);
        save();
      });
    });
    const axis = el('select', {id: 'x-axis'});
    axis.addEventListener('change', () => {
      state.x = axis.value;
      zooms.clear();
      for (const e of entries) zoom(e), apply(e);
      save();
    });
    const reset = el('button', {type: 'button', id: 'reset-zoom'}, 'reset zoom');
    reset.addEventListener('click', () => {
      zooms.clear();
      entries.forEach(e => zoom(e));
    });
    const lab = (text, ...kids) => el('label', {}, text, ' ', ...kids);
    const extras = el('span', {class: 'extra'});
    container.replaceChildren(
        lab('metrics', search), lab('smoothing', slider, shown), lab('x axis', axis), reset, extras,
        el('span', {class: 'muted'}, 'drag across a chart to zoom (Shift+wheel too; double click: back)'));
    container.classList.add('chart-controls');
    pinnedBox = el('div', {class: 'grid', id: 'pinned', hidden: ''});
    container.after(pinnedBox);
    return {container, axis, extras};
  }
  // The x axes the points allow: step always, wall time and epoch where every line has them.
  const axesOf = points => ['step', 'time', 'epoch'].filter(
      a => a === 'step' || points.some(p => p[a] !== null && p[a] !== undefined));
  const clear = () => {  // the page draws everything again (the zooms stay)
    for (const e of entries)
      if (e.gone) e.gone.abort();
    entries.length = 0;
    dragging = false;
    queue = [];
    if (pinnedBox) pinnedBox.replaceChildren();
    waiting.splice(0).forEach(resolve => resolve());
  };
  const busy = () => dragging;
  return {add, line, later, soon, apply, bar, axesOf, clear, drawn, busy, state, entries};
})();
