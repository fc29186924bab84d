'use strict';
// EXPERIMENT, the study's name, is set before this script (serve_pages.cpp).
const params = new URLSearchParams(location.search);
const choose = document.getElementById('choose');
document.getElementById('name').textContent = EXPERIMENT;
document.getElementById('study-link').href = '/study/' + encodeURIComponent(EXPERIMENT);
choose.elements.phase.value = params.get('phase') || 'explore';
choose.addEventListener('submit', e => {
  e.preventDefault();
  params.set('metric', choose.elements.metric.value);
  params.set('phase', choose.elements.phase.value);
  location.search = params.toString();
});
const NS = 'http://www.w3.org/2000/svg';
const svg = (tag, attrs = {}, text) => {
  const e = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
};
const shown = setting;  // settings are TOML text: shown without a string's quotes, 1e+01 as 10
const colour = t => `hsl(${(1 - t) * 230}, 75%, 45%)`;  // blue (low) to red (high)
// The colour scale, and which end of it is better.
function legend(lo, hi, up) {
  const bar = el('span', {class: 'scale'});
  bar.style.background = `linear-gradient(to right, ${colour(0)}, ${colour(0.5)}, ${colour(1)})`;
  return el(
      'p', {id: 'sweep-legend'}, el('span', {}, fmt(lo, 4) + ' '), bar, el('span', {}, ' ' + fmt(hi, 4)),
      el('span', {class: 'muted'},
         `  colour: final value, blue low, red high; ${up ? 'higher' : 'lower'} is better ` +
             `(${up ? 'red' : 'blue'})`));
}
// Brushing: a drag along an axis keeps the lines that cross it inside the dragged range; with
// several brushes, those inside all. A click (no drag) on an axis clears its brush. The brushes
// are kept in the address as fractions of each axis from its foot (?brush=test/mse:0.5:1).
function brushes(plot, axes, x, y, scale) {
  const ranges = axes.map(() => null), lines = [...plot.querySelectorAll('polyline.run')], bands = [];
  const fraction = py => (y(0) - py) / (y(0) - y(1)), pixel = f => y(0) - f * (y(0) - y(1));
  const keep = () => {
    const text = axes.map(
                         (a, i) => ranges[i] &&
                             `${a.key}:${fraction(ranges[i][1]).toFixed(3)}:` + fraction(ranges[i][0]).toFixed(3))
                     .filter(t => t)
                     .join(';');
    if (text)
      params.set('brush', text);
    else
      params.delete('brush');
    history.replaceState(
        null, '', '?' + params.toString().replace(/%2F/g, '/').replace(/%3A/g, ':').replace(/%3B/g, ';'));
  };
  const at = (line, i) => Number(line.getAttribute('points').split(' ')[i].split(',')[1]);
  const refresh = () => {
    let kept = 0;
    for (const line of lines) {
      const inside = ranges.every((r, i) => !r || (at(line, i) >= r[0] && at(line, i) <= r[1]));
      line.setAttribute('stroke-opacity', inside ? 0.75 : 0.06);
      line.dataset.kept = inside ? 'yes' : 'no';
      kept += inside;
    }
    document.body.dataset.kept = kept;
  };
  axes.forEach((a, i) => {
    const band = svg(
        'rect', {x: x(i) - 8, width: 16, y: y(1), height: 0, class: 'brush', fill: '#1f77b4', 'fill-opacity': 0.25});
    const hit = svg('rect', {
      x: x(i) - 10,
      width: 20,
      y: y(1) - 8,  // a little beyond the ends, so a drag can start above the top line
      height: y(0) - y(1) + 16,
      fill: 'transparent',
      class: 'axis-hit',
      'data-axis': a.key,
      cursor: 'ns-resize'
    });
    let from = null;
    const svgY = e => {
      const p = plot.createSVGPoint();
      p.x = e.clientX, p.y = e.clientY;
      return p.matrixTransform(plot.getScreenCTM().inverse()).y;
    };
    hit.addEventListener('mousedown', e => {
      from = svgY(e);
      e.preventDefault();
    });
    plot.addEventListener('mousemove', e => {
      if (from === null) return;
      const to = svgY(e);
      band.setAttribute('y', Math.min(from, to));
      band.setAttribute('height', Math.abs(to - from));
    });
    window.addEventListener('mouseup', e => {
      if (from === null) return;
      const to = svgY(e), a0 = Math.min(from, to), a1 = Math.max(from, to);
      from = null;
      ranges[i] = a1 - a0 < 3 ? null : [a0, a1];
      if (!ranges[i]) band.setAttribute('height', 0);
      refresh();
      keep();
    });
    plot.append(band, hit);
    bands.push(band);
  });
  for (const text of (params.get('brush') || '').split(';').filter(t => t)) {  // the address's brushes
    const parts = text.split(':'), hi = Number(parts.pop()), lo = Number(parts.pop());
    const i = axes.findIndex(a => a.key === parts.join(':'));
    if (i < 0 || !(hi > lo)) continue;
    ranges[i] = [pixel(hi), pixel(lo)];
    bands[i].setAttribute('y', ranges[i][0]);
    bands[i].setAttribute('height', ranges[i][1] - ranges[i][0]);
  }
  refresh();
}
(async () => {
  const q = new URLSearchParams({metric: params.get('metric') || 'test/mse', phase: params.get('phase') || 'explore'});
  let D;
  try {
    D = await get(`/api/sweep/${encodeURIComponent(EXPERIMENT)}?${q}`);
  } catch (e) {
    document.getElementById('plot').replaceChildren(el('div', {class: 'nodata', id: 'no-sweep'}, e.message));
    try {  // the menu still offers what the study logged, to choose again
      const runs = await get('/api/runs?' + new URLSearchParams({experiment: EXPERIMENT, size: 1}));
      choose.elements.metric.replaceChildren(...runs.metrics.map(m => el('option', {}, m)));
    } catch (_) {
    }
    document.body.dataset.ready = 'yes';
    return;
  }
  choose.elements.metric.replaceChildren(...D.metrics.map(m => el('option', {}, m)));
  choose.elements.metric.value = D.metric;
  // Axes: each setting (numbers on a linear scale, anything else as evenly spaced levels), then the metric.
  // A setting that takes one value wherever it is set (a plugin's own, "(unset)" under the others)
  // says no more than the plugin's axis: it is left out.
  const varying = D.settings.map((key, i) => i)
                      .filter(i => new Set(D.runs.map(r => r.settings[i]).filter(v => v !== '(unset)')).size > 1);
  const up = higherIsBetter(D.metric);
  document.getElementById('summary').textContent =
      `${plural(D.runs.length, 'finished run')}, ${plural(D.settings.length, 'setting')} that differ` +
      (D.settings.length > varying.length ?
           ` (${D.settings.length - varying.length} set by one plugin only, to one value, not drawn)` :
           '') +
      `; colour and last axis: final ${D.metric}. Drag along an axis to keep the runs in that range ` +
      `(several axes: all of them); a click on an axis clears it.`;
  const axes = varying.map(i => {
    const key = D.settings[i];
    const values = D.runs.map(r => shown(r.settings[i]));
    const levels = [...new Set(values)];
    const numeric = levels.every(v => v !== '' && !isNaN(Number(v)));
    if (numeric)
      levels.sort((a, b) => Number(a) - Number(b));
    else
      levels.sort();
    const lo = Math.min(...levels.map(Number)), hi = Math.max(...levels.map(Number));
    const pos = numeric ? v => hi > lo ? (Number(v) - lo) / (hi - lo) : 0.5 :
                          v => levels.length > 1 ? levels.indexOf(v) / (levels.length - 1) : 0.5;
    const ticks = levels.length <= 12 ? levels : [levels[0], levels[levels.length - 1]];
    return {key, pos, ticks, value: r => shown(r.settings[i])};
  });
  const ys = D.runs.map(r => r.value), lo = Math.min(...ys), hi = Math.max(...ys);
  const scale = v => hi > lo ? (v - lo) / (hi - lo) : 0.5;
  axes.push({
    key: D.metric,
    pos: v => scale(Number(v)),
    ticks: [lo, (lo + hi) / 2, hi].map(v => fmt(v, 4)),
    value: r => r.value,
    metric: true
  });
  const W = Math.max(1100, 130 * axes.length), H = 380, top = 40, bottom = 30, left = 70, right = 90;
  const x = i => left + (axes.length > 1 ? i * (W - left - right) / (axes.length - 1) : (W - left - right) / 2);
  const y = t => top + (1 - t) * (H - top - bottom);
  // As wide as the column, whatever the number of axes (the drawing scales).
  const plot = svg('svg', {width: '100%', viewBox: `0 0 ${W} ${H}`, id: 'parallel'});
  const runs = svg('g', {id: 'lines'});
  for (const r of D.runs) {
    const at = (a, i) => `${x(i).toFixed(1)},${y(a.metric ? scale(r.value) : a.pos(a.value(r))).toFixed(1)}`;
    const pts = axes.map(at).join(' ');
    const line = svg('polyline', {
      points: pts,
      fill: 'none',
      stroke: colour(scale(r.value)),
      'stroke-width': 1.4,
      'stroke-opacity': 0.75,
      class: 'run',
      'data-run': r.id
    });
    line.append(svg('title', {}, `run ${r.id}: ${r.variant}, seed ${r.seed}, ${D.metric} ${fmt(r.value)}`));
    line.addEventListener('click', () => {
      location.href = '/run/' + r.id;
    });
    line.style.cursor = 'pointer';
    runs.append(line);
  }
  plot.append(runs);
  axes.forEach((a, i) => {
    const g = svg('g', {class: 'axis'});
    g.append(svg('line', {x1: x(i), x2: x(i), y1: y(0), y2: y(1), stroke: '#333'}));
    g.append(svg('text', {x: x(i), y: top - 14, 'text-anchor': 'middle', 'font-weight': 'bold'}, a.key));
    for (const t of a.ticks) {
      const yy = y(a.metric ? scale(Number(t)) : a.pos(t));
      g.append(svg('line', {x1: x(i) - 4, x2: x(i), y1: yy, y2: yy, stroke: '#333'}));
      g.append(svg('text', {x: x(i) - 6, y: yy + 4, 'text-anchor': 'end'}, String(t).slice(0, 18)));
    }
    plot.append(g);
  });
  brushes(plot, axes, x, y, scale);
  document.getElementById('plot').replaceChildren(legend(lo, hi, up), plot);
  const imp = D.importance.slice().sort((a, b) => (b.eta2 ?? -1) - (a.eta2 ?? -1));
  const t =
      el('table', {id: 'importance-table'},
         el('tr', {}, el('th', {}, 'setting'), el('th', {}, 'values'), el('th', {}, 'η² (share of variance)'),
            el('th', {}, 'F test p')));
  for (const r of imp)
    t.append(
        el('tr', {}, el('td', {}, r.setting), el('td', {class: 'num'}, r.levels),
           el('td', {class: 'num'}, r.eta2 === null ? '' : (100 * r.eta2).toFixed(1) + ' %'),
           el('td', {class: 'num'}, fmt(r.p, 3))));
  document.getElementById('importance').replaceChildren(t);
  document.body.dataset.lines = D.runs.length;
  document.body.dataset.axes = axes.length;
  document.body.dataset.ready = 'yes';
})();
