// The curve charts every page with curves shares (after page.js, which every page loads first).
'use strict';
// ---- Chart controls, shared by the run, compare and study pages: smoothing (EMA; the raw line stays,
// faint), the x axis (step, wall time, epoch where logged), zoom (drag across a chart; Shift+wheel; a
// double click or "reset zoom" undoes it; every chart of the page zooms together), the step under the
// pointer shown on every chart, a metric search and pinning a chart to the top. A page gives each
// x-bound dataset a spec: Charts.line(canvas, panel, metric, config, specs), specs[i] for
// chart.data.datasets[i]: {kind: 'line'|'raw'|'band'|'seed', points: [{step, time, epoch, y}]} or
// {kind: 'ref', y} (a horizontal reference across the drawn x range). A line may also carry `smoothed`
// points and `smoothedAt`, the smoothing they are for (the server's average over every point a run
// logged, thinned: Charts.source): drawn instead of an average of `points`. The settings live in the
// address.
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
// (Chart.js's min-max decimation; not where the server thinned them, `decimate` false: a point it
// keeps keeps its own x). The tooltip follows Charts' hover (every chart at the same x), not
// Chart.js's own: the charts listen to clicks only (the legend's).
const curveOptions = (legend, y = yAxis(), decimate = true) => ({
  animation: false,
  maintainAspectRatio: false,
  parsing: false,
  normalized: true,
  events: ['click'],
  interaction: {mode: 'nearest', intersect: false},
  plugins: {
    legend: legend ? {labels: Object.assign({boxWidth: 10}, legend)} : {display: false},
    decimation: {enabled: decimate, algorithm: 'min-max'}
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
  // The page's zoom, [min, max] of x, every chart's (a chart drawn again is drawn zoomed as it was), and
  // the x under the pointer (null: none). `dragging`: a drag across a chart is under way (live.js waits).
  let range = null, hoverX = null;
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
      const data = !smoothed                          ? xy(s.points) :
          s.smoothed && s.smoothedAt === state.smooth ? xy(s.smoothed) :
                                                        xy(s.points, ema(s.points, state.smooth));
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
  // A chart drawn with the page's zoom (and, `data`: its points filled again first).
  function show(entry, data = false) {
    if (!entry.chart) return;  // not drawn yet: it will be, with the settings of then
    if (data) fill(entry.chart.data.datasets, entry.specs);
    const x = entry.chart.options.scales.x;
    x.title.text = TITLE[state.x];
    if (range)
      [x.min, x.max] = range;
    else
      delete x.min, delete x.max;
    entry.panel.dataset.zoomed = range ? 'yes' : 'no';
    entry.chart.update('none');
  }
  const apply = entry => show(entry, true);
  // ---- points read from the server (the run and compare pages: Charts.source(read)): a smoothing or a
  // zoom reads them again, `read(query)` with series_json's query (?points=&smooth=, the zoom's x range
  // as &from=&to= steps) resolving to a function that puts them into the specs; then every chart is
  // drawn again. One read at a time, the newest settings last; the last 8 answers kept (a reset zoom,
  // a smoothing chosen again: no request). Once the charts show a smoothing, body[data-smoothed] says which.
  const POINTS = 2000;  // a chart about 500 px wide: each pixel's first, last, least and greatest
  // `held`: the zoom whose points the specs hold; a smoothing alone asks for no points, its average only.
  let remote = null, reading = null, again = false, held = 'null';
  const key = () => JSON.stringify(range);
  const answers = new Map();
  function steps([min, max]) {  // the x range as steps, from the points held either side of it
    if (state.x === 'step') return [Math.floor(min), Math.ceil(max)];
    let from = Infinity, to = -Infinity;
    for (const e of entries)
      for (const s of e.specs) {
        const ps = s.points || [];
        const a = ps.findIndex(p => p[state.x] >= min), b = ps.findIndex(p => p[state.x] > max);
        if (a >= 0) from = Math.min(from, ps[Math.max(0, a - 1)].step);
        if (a >= 0) to = Math.max(to, ps[b < 0 ? ps.length - 1 : b].step);
      }
    return from <= to ? [from, to] : [0, 0];
  }
  function query(raw = true) {
    const q = new URLSearchParams({points: POINTS});
    if (state.smooth) q.set('smooth', state.smooth);
    if (!raw) q.set('raw', 0);
    if (range) [0, 1].forEach(i => q.set(['from', 'to'][i], steps(range)[i]));
    return q.toString();
  }
  const shown = () => {  // body[data-views]: how many times the charts were drawn with new points or settings
    document.body.dataset.smoothed = state.smooth;
    document.body.dataset.views = Number(document.body.dataset.views || 0) + 1;
    save();
  };
  async function reread() {
    do {
      again = false;
      const zoom = key();
      if (zoom === held && !state.smooth) break;  // the points held, no average: nothing to ask for
      const q = query(held !== zoom || !state.smooth);
      let put = answers.get(q);
      if (!put) {
        put = await remote(q);
        answers.set(q, put);
        if (answers.size > 8) answers.delete(answers.keys().next().value);
      }
      if (!again) put(), held = zoom;
    } while (again);
    entries.forEach(apply);
    shown();
  }
  function refresh() {
    if (!remote) {
      entries.forEach(apply);
      return Promise.resolve(shown());
    }
    if (reading) return again = true, reading;
    return reading = reread().catch(e => report(e.message)).finally(() => reading = null);
  }
  // The page's read (the page calls it again with null when the run logged more: answers forgotten).
  const source = read => {
    answers.clear();
    held = key();
    if (read) remote = read;
  };
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
  // Every chart zoomed into [min, max] of x (no min: the whole range), then its points read again.
  function zoom(min, max) {
    range = min === undefined ? null : [min, max];
    entries.forEach(e => show(e));
    if (remote) refresh();
  }
  // The x under the pointer on every chart in view: a vertical line, and each line's point nearest to
  // it in the tooltip (body[data-hover-step]: the x shown).
  const crosshair = {
    id: 'htmCrosshair',
    afterDatasetsDraw(chart) {
      const a = chart.chartArea, px = hoverX === null ? NaN : chart.scales.x.getPixelForValue(hoverX);
      if (!(px >= a.left && px <= a.right)) return;
      const c = chart.ctx;
      c.save();
      c.strokeStyle = 'rgba(0, 0, 0, 0.4)';
      c.beginPath();
      c.moveTo(px, a.top);
      c.lineTo(px, a.bottom);
      c.stroke();
      c.restore();
    }
  };
  let hoverFrame = false;
  function hover(x) {
    hoverX = x;
    document.body.dataset.hoverStep = x === null ? '' : x;
    if (hoverFrame) return;
    hoverFrame = true;
    requestAnimationFrame(() => {
      hoverFrame = false;
      for (const e of entries)
        if (e.chart && !e.panel.hidden && inView(e.chart.canvas)) pointAt(e);
    });
  }
  function pointAt({chart, specs}) {
    const px = hoverX === null ? NaN : chart.scales.x.getPixelForValue(hoverX), active = [];
    if (px >= chart.chartArea.left && px <= chart.chartArea.right)
      specs.forEach((s, i) => {
        const els = chart.getDatasetMeta(i).data;
        if (s.kind !== 'line' || !chart.isDatasetVisible(i) || !els.length) return;
        let lo = 0, hi = els.length - 1;  // the elements are in x order
        while (lo < hi) {
          const mid = (lo + hi) >> 1;
          if (els[mid].x < px)
            lo = mid + 1;
          else
            hi = mid;
        }
        if (lo > 0 && px - els[lo - 1].x <= els[lo].x - px) lo--;
        active.push({datasetIndex: i, index: lo});
      });
    chart.setActiveElements(active);
    chart.tooltip.setActiveElements(active, {x: px, y: chart.chartArea.top});
    chart.render();
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
  function filter() {
    const words = state.search.toLowerCase().split(/\s+/).filter(w => w);
    let shown = 0;
    for (const e of entries) {
      e.panel.hidden = !words.every(w => e.metric.toLowerCase().includes(w));
      shown += !e.panel.hidden;
    }
    document.body.dataset.shownCharts = shown;
  }
  // Drag across the plot to zoom into that x range; Shift+wheel zooms about the pointer; the pointer's
  // x is shown on every chart. The window's listener goes with the chart (entry.gone, aborted when the
  // page is drawn again).
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
      const a = chart.chartArea;
      hover(e.offsetX >= a.left && e.offsetX <= a.right ? chart.scales.x.getValueForPixel(e.offsetX) : null);
      if (from === null) return;
      Object.assign(band.style, {left: Math.min(from, e.offsetX) + 'px', width: Math.abs(e.offsetX - from) + 'px'});
    });
    canvas.addEventListener('mouseleave', () => hover(null));
    window.addEventListener('mouseup', e => {
      if (from === null) return;
      const to = e.clientX - canvas.getBoundingClientRect().left, a = Math.min(from, to), b = Math.max(from, to);
      from = null;
      dragging = false;
      band.hidden = true;
      if (b - a < 5) return;
      const scale = chart.scales.x;
      zoom(
          scale.getValueForPixel(Math.max(a, chart.chartArea.left)),
          scale.getValueForPixel(Math.min(b, chart.chartArea.right)));
    }, {signal: entry.gone.signal});
    canvas.addEventListener('wheel', e => {
      if (!e.shiftKey) return;
      e.preventDefault();
      const delta = e.deltaY || e.deltaX;  // with Shift held, browsers turn the wheel sideways
      const scale = chart.scales.x, at = scale.getValueForPixel(e.offsetX), f = delta < 0 ? 0.8 : 1.25;
      zoom(at - (at - scale.min) * f, at + (scale.max - at) * f);
    });
    canvas.addEventListener('dblclick', () => zoom());
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
      const x = config.options.scales.x;
      x.title = {display: true, text: TITLE[state.x]};
      if (range) [x.min, x.max] = range;
      config.plugins = [crosshair];
      entry.chart = new Chart(canvas, config);
      panel.dataset.zoomed = range ? 'yes' : 'no';
      zoomable(entry);
    };
    soon(canvas, draw);
    return entry;
  }
  // A panel whose chart comes later (line(..., entry)): searched and pinned meanwhile.
  const later = (panel, metric) => join({chart: null, panel, metric, specs: []});
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
    const value = el('span', {class: 'muted'}, String(state.smooth));
    let queued = false;
    slider.addEventListener('input', () => {
      state.smooth = Number(slider.value);
      value.textContent = slider.value;
      if (queued) return;
      queued = true;
      requestAnimationFrame(() => {
        queued = false;
        refresh();
      });
    });
    const axis = el('select', {id: 'x-axis'});
    axis.addEventListener('change', () => {
      state.x = axis.value;
      range = null;
      if (remote) entries.forEach(apply);  // the points held, on the new axis, until the new ones come
      refresh();
    });
    const reset = el('button', {type: 'button', id: 'reset-zoom'}, 'reset zoom');
    reset.addEventListener('click', () => zoom());
    const lab = (text, ...kids) => el('label', {}, text, ' ', ...kids);
    const extras = el('span', {class: 'extra'});
    container.replaceChildren(
        lab('metrics', search), lab('smoothing', slider, value), lab('x axis', axis), reset, extras,
        el('span', {class: 'muted'}, 'drag across a chart to zoom them all (Shift+wheel too; double click: back)'));
    container.classList.add('chart-controls');
    pinnedBox = el('div', {class: 'grid', id: 'pinned', hidden: ''});
    container.after(pinnedBox);
    return {container, axis, extras};
  }
  // The x axes the points allow: step always, wall time and epoch where every line has them.
  const axesOf = points => ['step', 'time', 'epoch'].filter(
      a => a === 'step' || points.some(p => p[a] !== null && p[a] !== undefined));
  // A series of series_json's columns as points.
  const points = c => c.step.map((step, i) => ({step, time: c.time[i], epoch: c.epoch && c.epoch[i], y: c.value[i]}));
  const clear = () => {  // the page draws everything again (the zoom stays)
    for (const e of entries)
      if (e.gone) e.gone.abort();
    entries.length = 0;
    dragging = false;
    queue = [];
    if (pinnedBox) pinnedBox.replaceChildren();
    waiting.splice(0).forEach(resolve => resolve());
  };
  const busy = () => dragging;
  return {line, later, soon, apply, bar, axesOf, clear, drawn, busy, state, entries, source, query, points, refresh};
})();
