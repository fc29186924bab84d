// The pages of `htm serve` other than a study's (which is `htm report`'s page): the runs table,
// one run's live curves, a sweep's parallel coordinates. Each is a fixed page whose script reads
// the JSON routes; values reach the page only as text nodes and attributes (el() below), never
// as HTML. A page that fails to draw says so in #errors, which the browser test reads.
#include <string>

#include "page_text.h"
#include "serve.h"

namespace htm::serve {
namespace {

constexpr const char* kHead = R"html(<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>TITLE</title>
<style>
body { font: 14px/1.45 system-ui, sans-serif; margin: 0 auto; max-width: 1280px; padding: 12px 24px; color: #222; }
h1 { font-size: 21px; margin: 4px 0; } h2 { font-size: 16px; margin: 22px 0 8px; border-bottom: 1px solid #ddd; }
nav a { margin-right: 14px; } .muted { color: #666; } .bad { color: #b00020; } .good { color: #2a7d2a; }
table { border-collapse: collapse; margin: 6px 0; } td, th { padding: 3px 9px; border-bottom: 1px solid #eee;
  text-align: left; white-space: nowrap; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
th.sort { cursor: pointer; text-decoration: underline dotted; } td.wrap { white-space: normal; max-width: 360px; }
form { display: flex; flex-wrap: wrap; gap: 8px 14px; align-items: end; margin: 8px 0; }
form label { display: flex; flex-direction: column; font-size: 12px; color: #555; }
input[type=text] { width: 300px; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(380px, 1fr)); gap: 14px; }
.panel { border: 1px solid #e3e3e3; border-radius: 6px; padding: 8px; } .panel h3 { font-size: 13px; margin: 0 0 4px; }
.chart { position: relative; height: 230px; }
.nodata { padding: 14px; color: #777; background: #fafafa; border: 1px dashed #ccc; border-radius: 6px; }
#errors:empty { display: none; }
#errors { background: #fee; border: 1px solid #b00020; padding: 8px; white-space: pre-wrap; }
svg text { font: 11px system-ui, sans-serif; }
figure { margin: 0; } figure img { max-width: 100%; border: 1px solid #eee; }
</style></head><body>
<div id="errors"></div>
<script>
"use strict";
const report = text => { document.getElementById('errors').textContent += 'error: ' + text + '\n'; };
window.addEventListener('error', e => report(e.message));
window.addEventListener('unhandledrejection', e => report(e.reason && e.reason.message || e.reason));
const el = (tag, attrs = {}, ...kids) => { const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  for (const k of kids) e.append(k ?? '');
  return e; };
const fmt = (x, d = 5) => x === null || x === undefined ? '' : Number(x).toPrecision(d).replace(/\.?0+(e|$)/, '$1');
const STATUS_CLASS = {failed: 'bad', killed: 'bad', interrupted: 'bad', running: 'good'};
const day = t => t ? new Date(t * 1000).toISOString().replace('T', ' ').slice(0, 19) : '';
const span = s => !(s >= 0) ? '' : s < 90 ? `${s.toFixed(1)} s`
  : s < 5400 ? `${(s / 60).toFixed(1)} min` : `${(s / 3600).toFixed(2)} h`;
async function get(url) {
  const response = await fetch(url);
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}
</script>
<nav><a href="/">runs</a><span class="muted">htm serve: read only</span></nav>
)html";

std::string head(const std::string& title) { return page::replace_all(kHead, "TITLE", page::escape_html(title)); }

// ---- the runs table
constexpr const char* kRuns = R"html(
<h1>Runs</h1>
<form id="filters">
  <label>experiment <select name="experiment"><option value="">(all)</option></select></label>
  <label>status <select name="status"><option value="">(any)</option><option>running</option><option>finished</option>
    <option>failed</option><option>interrupted</option><option>killed</option></select></label>
  <label>where (KEY OP VALUE; several joined by ';')
    <input type="text" name="where" placeholder="test/mse<0.2; model.dim=64; tag.phase=confirm" list="keys"></label>
  <label>metric columns (';')
    <input type="text" name="column" placeholder="test/mse; test/accuracy" list="metrics"></label>
  <label>per page <select name="size"><option>25</option><option selected>50</option><option>100</option>
    <option>500</option></select></label>
  <button type="submit">show</button>
</form>
<datalist id="keys"></datalist><datalist id="metrics"></datalist>
<p id="summary" class="muted"></p>
<div id="table"></div>
<p><button id="prev">previous</button> <button id="next">next</button> <span id="pageinfo" class="muted"></span></p>
<h2>Studies</h2><div id="studies"></div>
<p class="muted">Filters: KEY is id, experiment, variant, seed, status, git, config_hash, started, duration (s),
tag.NAME, a final metric split/name (its last logged value), or any setting (model.dim). OP is one of
= != &lt; &lt;= &gt; &gt;= ~ (contains). Click a column to sort by it.</p>
<script>
const form = document.getElementById('filters');
const state = new URLSearchParams(location.search);
const multi = name => (state.get(name) || '').split(';').map(s => s.trim()).filter(s => s);
function url() {
  const q = new URLSearchParams();
  for (const k of ['experiment', 'status', 'size', 'page', 'sort', 'order']) if (state.get(k)) q.set(k, state.get(k));
  for (const w of multi('where')) q.append('where', w);
  for (const c of multi('column')) q.append('column', c);
  return '/api/runs?' + q;
}
for (const k of ['where', 'column', 'status', 'size']) if (state.get(k)) form.elements[k].value = state.get(k);
form.addEventListener('submit', e => {
  e.preventDefault();
  for (const k of ['experiment', 'status', 'where', 'column', 'size']) {
    const v = form.elements[k].value.trim(); if (v) state.set(k, v); else state.delete(k); }
  state.delete('page'); go();
});
function go() { history.replaceState(null, '', '?' + state); load(); }
const page = () => Number(state.get('page') || 0);
document.getElementById('prev').onclick = () => { state.set('page', Math.max(0, page() - 1)); go(); };
document.getElementById('next').onclick = () => { state.set('page', page() + 1); go(); };
let timer = null, loads = 0;
async function load() {
  clearTimeout(timer);
  let D;
  try { D = await get(url()); } catch (e) {
    document.getElementById('summary').replaceChildren(el('span', {class: 'bad', id: 'bad-filter'}, e.message));
    document.getElementById('table').replaceChildren(); document.body.dataset.ready = 'yes'; return;
  }
  const select = form.elements.experiment;
  if (select.options.length === 1) for (const [name] of D.experiments) select.append(el('option', {}, name));
  select.value = state.get('experiment') || '';
  document.getElementById('keys').replaceChildren(...['experiment', 'variant', 'seed', 'status', 'duration',
    'tag.phase',
    ...D.metrics, ...D.settings].map(k => el('option', {value: k})));
  document.getElementById('metrics').replaceChildren(...D.metrics.map(k => el('option', {value: k})));
  const first = D.page * D.size;
  document.getElementById('summary').textContent =
    D.total ? `${D.total} runs match; ${first + 1} to ${first + D.runs.length} shown` : 'No run matches.';
  document.getElementById('pageinfo').textContent = `page ${D.page + 1} of ${Math.max(1, Math.ceil(D.total / D.size))}`;
  document.getElementById('prev').disabled = D.page === 0;
  document.getElementById('next').disabled = first + D.runs.length >= D.total;
  const sort = state.get('sort') || 'id', asc = state.get('order') === 'asc';
  const head = (label, key) => {
    const th = el('th', {class: 'sort', 'data-sort': key}, label + (sort === key ? (asc ? ' ▲' : ' ▼') : ''));
    th.onclick = () => { state.set('order', sort === key && !asc ? 'asc' : 'desc'); state.set('sort', key); go(); };
    return th;
  };
  const t = el('table', {id: 'runs'}, el('tr', {}, head('run', 'id'), head('experiment', 'experiment'),
    head('variant', 'variant'), head('seed', 'seed'), head('status', 'status'), head('started (UTC)', 'started'),
    head('duration', 'duration'),
    ...D.columns.map(c => head(c, c)), el('th', {}, 'tags'), el('th', {}, 'error')));
  for (const r of D.runs) {
    const study = encodeURIComponent(r.experiment);
    t.append(el('tr', {'data-run': r.id, 'data-status': r.status},
      el('td', {}, el('a', {href: '/run/' + r.id}, String(r.id))),
      el('td', {}, el('a', {href: '/study/' + study}, r.experiment)),
      el('td', {}, r.variant), el('td', {class: 'num'}, r.seed ?? ''),
      el('td', {class: STATUS_CLASS[r.status] || ''}, r.status),
      el('td', {}, day(r.started)), el('td', {class: 'num'}, span(r.ended - r.started)),
      ...D.columns.map(c => el('td', {class: 'num', 'data-metric': c}, fmt(r.final[c]))),
      el('td', {class: 'wrap'}, r.tags), el('td', {class: 'wrap bad'}, r.error.slice(0, 200))));
  }
  document.getElementById('table').replaceChildren(
    D.runs.length ? t : el('div', {class: 'nodata'}, 'No run matches these filters.'));
  const studies = el('table', {id: 'study-list'}, el('tr', {}, el('th', {}, 'experiment'), el('th', {}, 'runs'),
    el('th', {}, 'training now'), el('th', {}, '')));
  for (const [name, runs, running] of D.experiments) {
    const q = encodeURIComponent(name);
    studies.append(el('tr', {}, el('td', {}, el('a', {href: '/study/' + q}, name)), el('td', {class: 'num'}, runs),
      el('td', {class: 'num'}, running), el('td', {}, el('a', {href: '/sweep/' + q}, 'sweep'))));
  }
  document.getElementById('studies').replaceChildren(studies);
  document.body.dataset.rows = D.runs.length;
  document.body.dataset.total = D.total;
  document.body.dataset.loads = ++loads;
  document.body.dataset.ready = 'yes';
  if (D.runs.some(r => r.status === 'running')) timer = setTimeout(load, 5000);  // live while runs train
}
load();
</script></body></html>
)html";

// ---- one run: its curves grow as the run logs (the page asks for the rows after its last)
constexpr const char* kRun = R"html(
<script src="/static/chart.js"></script>
<h1 id="title">Run RUN_ID</h1>
<p id="about" class="muted"></p>
<div id="curves" class="grid"></div>
<h2>References and counts <span class="muted">(the mean image, PCA, a linear classifier, parameters)</span></h2>
<div id="references" class="grid"></div>
<h2>Pictures</h2><div id="pictures" class="grid"></div>
<h2>Settings</h2><div id="settings"></div>
<script>
const RUN = RUN_ID;
const series = {};  // metric → {chart, points}
let last = 0, points = 0, polls = 0;
function chart(metric) {
  if (series[metric]) return series[metric];
  const canvas = el('canvas');
  const panel = el('div', {class: 'panel curve', 'data-metric': metric}, el('h3', {}, metric),
                   el('div', {class: 'chart'}, canvas));
  const reference = /\/baseline|parameters$|\/random\/|\/agglomerative\//.test(metric);
  const box = document.getElementById(reference ? 'references' : 'curves');
  const main = /^(train\/loss|test\/mse|test\/accuracy|test\/[^/]*f1)$/.test(metric);
  if (main) box.prepend(panel); else box.append(panel);
  const c = new Chart(canvas, {type: 'line', data: {datasets: [{label: metric, data: [], borderColor: '#1f77b4',
    borderWidth: 1.5, pointRadius: ctx => ctx.dataset.data.length < 3 ? 3 : 0}]},
    options: {animation: false, maintainAspectRatio: false, parsing: false, normalized: true,
    plugins: {legend: {display: false}}, scales: {x: {type: 'linear', title: {display: true, text: 'step'}}}}});
  return series[metric] = {chart: c, data: c.data.datasets[0].data};
}
async function poll() {
  const D = await get(`/api/run/${RUN}?after=${last}`);
  const r = D.run;
  if (D.params) {
    document.getElementById('title').textContent = `Run ${r.id}: ${r.experiment} / ${r.variant}, seed ${r.seed ?? ''}`;
    const t = el('table', {}, ...D.params.map(([k, v]) => el('tr', {}, el('td', {}, k), el('td', {}, v))));
    document.getElementById('settings').replaceChildren(t);
  }
  const about = document.getElementById('about');
  about.replaceChildren(el('span', {class: STATUS_CLASS[r.status] || '', id: 'status'}, r.status),
    ` · started ${day(Number(r.started))} UTC · ${span(Number(r.ended) - Number(r.started))} · git ${r.git}` +
    ` · config ${r.config_hash}` +
    ` · uuid ${r.uuid}` + (r.tags ? ` · tags ${r.tags}` : '') + ' · ',
    el('a', {href: '/study/' + encodeURIComponent(r.experiment)}, 'study'));
  if (r.error) about.append(el('div', {class: 'bad'}, r.error));
  const touched = new Set();
  for (const [rowid, metric, step, value] of D.metrics) {
    if (value === null) continue;
    const s = chart(metric);
    s.data.push({x: step, y: value}); touched.add(s); points++;
  }
  for (const s of touched) s.chart.update('none');
  last = D.last;
  const latest = {};
  for (const a of D.artifacts) if (/\.png$/.test(a.file)) latest[a.kind] = a;
  document.getElementById('pictures').replaceChildren(...Object.values(latest).map(a => el('figure', {},
    el('img', {src: `/artifact/${RUN}/${a.file.split('/').map(encodeURIComponent).join('/')}`, alt: a.kind}),
    el('figcaption', {class: 'muted'}, `${a.kind}, step ${a.step ?? ''}`))));
  const none = (id, text) => document.getElementById(id).replaceChildren(el('div', {class: 'nodata'}, text));
  if (!Object.keys(latest).length) none('pictures', 'No pictures yet.');
  if (!Object.keys(series).length) none('curves', 'No metrics logged yet.');
  document.body.dataset.points = points;
  document.body.dataset.status = r.status;
  document.body.dataset.polls = ++polls;
  document.body.dataset.ready = 'yes';
  if (D.more) setTimeout(poll, 0);
  else if (r.status === 'running') setTimeout(poll, 2000);
}
poll().catch(e => { report(e.message); document.body.dataset.ready = 'yes'; });
</script></body></html>
)html";

// ---- a sweep: parallel coordinates (one axis per setting that varies, then the metric; a
// line per run, coloured by the metric) and the per-setting variance table
constexpr const char* kSweep = R"html(
<h1>Sweep: <span id="name"></span></h1>
<form id="choose"><label>metric <select name="metric"></select></label>
  <label>phase <select name="phase"><option value="explore">exploration</option>
    <option value="confirm">confirmation</option></select></label>
  <button type="submit">show</button> <a id="study-link">the study's report</a></form>
<p id="summary" class="muted"></p>
<div id="plot"></div>
<h2>What explains the metric's variance</h2>
<div id="importance"></div>
<p class="muted">Method: for each setting, the finished runs of this phase are grouped by the setting's value;
&eta;&sup2; is the between-group sum of squares over the total (a one-way ANOVA), with its F test. "variant" groups by
variant: every difference between variants together. Settings that change together (a variant that sets two) get the
same share: &eta;&sup2; does not separate them, and seeds are what is left over. It is descriptive, not corrected for
the number of settings: decide with htm compare's paired, Holm-adjusted tests.</p>
<script>
const EXPERIMENT = EXPERIMENT_JSON;
const params = new URLSearchParams(location.search);
const choose = document.getElementById('choose');
document.getElementById('name').textContent = EXPERIMENT;
document.getElementById('study-link').href = '/study/' + encodeURIComponent(EXPERIMENT);
choose.elements.phase.value = params.get('phase') || 'explore';
choose.addEventListener('submit', e => { e.preventDefault();
  params.set('metric', choose.elements.metric.value); params.set('phase', choose.elements.phase.value);
  location.search = params.toString(); });
const NS = 'http://www.w3.org/2000/svg';
const svg = (tag, attrs = {}, text) => { const e = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e; };
const shown = v => v.replace(/^"(.*)"$/, '$1');  // settings are TOML text: a string without its quotes
const colour = t => `hsl(${(1 - t) * 230}, 75%, 45%)`;  // blue (low) to red (high)
(async () => {
  const q = new URLSearchParams({metric: params.get('metric') || 'test/mse', phase: params.get('phase') || 'explore'});
  let D;
  try { D = await get(`/api/sweep/${encodeURIComponent(EXPERIMENT)}?${q}`); } catch (e) {
    document.getElementById('plot').replaceChildren(el('div', {class: 'nodata', id: 'no-sweep'}, e.message));
    document.body.dataset.ready = 'yes'; return;
  }
  choose.elements.metric.replaceChildren(...D.metrics.map(m => el('option', {}, m)));
  choose.elements.metric.value = D.metric;
  document.getElementById('summary').textContent =
    `${D.runs.length} finished runs, ${D.settings.length} settings that differ; ` +
    `colour and last axis: final ${D.metric}`;
  // Axes: each setting (numbers on a linear scale, anything else as evenly spaced levels), then the metric.
  const axes = D.settings.map((key, i) => {
    const values = D.runs.map(r => shown(r.settings[i]));
    const levels = [...new Set(values)];
    const numeric = levels.every(v => v !== '' && !isNaN(Number(v)));
    if (numeric) levels.sort((a, b) => Number(a) - Number(b)); else levels.sort();
    const lo = Math.min(...levels.map(Number)), hi = Math.max(...levels.map(Number));
    const pos = numeric ? v => hi > lo ? (Number(v) - lo) / (hi - lo) : 0.5
                        : v => levels.length > 1 ? levels.indexOf(v) / (levels.length - 1) : 0.5;
    const ticks = levels.length <= 12 ? levels : [levels[0], levels[levels.length - 1]];
    return {key, pos, ticks, value: r => shown(r.settings[i])};
  });
  const ys = D.runs.map(r => r.value), lo = Math.min(...ys), hi = Math.max(...ys);
  const scale = v => hi > lo ? (v - lo) / (hi - lo) : 0.5;
  axes.push({key: D.metric, pos: v => scale(Number(v)), ticks: [lo, (lo + hi) / 2, hi].map(v => fmt(v, 4)),
             value: r => r.value, metric: true});
  const W = Math.max(640, 150 * axes.length), H = 380, top = 40, bottom = 30, left = 70, right = 90;
  const x = i => left + (axes.length > 1 ? i * (W - left - right) / (axes.length - 1) : (W - left - right) / 2);
  const y = t => top + (1 - t) * (H - top - bottom);
  const plot = svg('svg', {width: W, height: H, viewBox: `0 0 ${W} ${H}`, id: 'parallel'});
  const runs = svg('g', {id: 'lines'});
  for (const r of D.runs) {
    const at = (a, i) => `${x(i).toFixed(1)},${y(a.metric ? scale(r.value) : a.pos(a.value(r))).toFixed(1)}`;
    const pts = axes.map(at).join(' ');
    const line = svg('polyline', {points: pts, fill: 'none', stroke: colour(scale(r.value)), 'stroke-width': 1.4,
      'stroke-opacity': 0.75, class: 'run', 'data-run': r.id});
    line.append(svg('title', {}, `run ${r.id}: ${r.variant}, seed ${r.seed}, ${D.metric} ${fmt(r.value)}`));
    line.addEventListener('click', () => { location.href = '/run/' + r.id; });
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
  document.getElementById('plot').replaceChildren(el('div', {style: 'overflow-x: auto'}, plot));
  const imp = D.importance.slice().sort((a, b) => (b.eta2 ?? -1) - (a.eta2 ?? -1));
  const t = el('table', {id: 'importance-table'}, el('tr', {}, el('th', {}, 'setting'), el('th', {}, 'values'),
    el('th', {}, 'η² (share of variance)'), el('th', {}, 'F test p')));
  for (const r of imp) t.append(el('tr', {}, el('td', {}, r.setting), el('td', {class: 'num'}, r.levels),
    el('td', {class: 'num'}, r.eta2 === null ? '' : (100 * r.eta2).toFixed(1) + ' %'),
    el('td', {class: 'num'}, fmt(r.p, 3))));
  document.getElementById('importance').replaceChildren(t);
  document.body.dataset.lines = D.runs.length;
  document.body.dataset.axes = axes.length;
  document.body.dataset.ready = 'yes';
})();
</script></body></html>
)html";

}  // namespace

std::string runs_page() { return head("htm serve: runs") + kRuns; }

std::string run_page(int64_t run_id) {
  return head("htm serve: run " + std::to_string(run_id)) + page::replace_all(kRun, "RUN_ID", std::to_string(run_id));
}

std::string sweep_page(const std::string& experiment) {
  // The name goes into the script as a JSON string ('<' escaped: no "</script>" can end it).
  return head("htm serve: sweep " + experiment) + page::replace_all(kSweep, "EXPERIMENT_JSON", page::quote(experiment));
}

}  // namespace htm::serve
