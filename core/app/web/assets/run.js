'use strict';
// RUN, the run's id, is set before this script (serve_pages.cpp). The page asks for the run in one
// request (its record, settings, pictures and every series thinned for its charts: /api/run/ID?points=N),
// again every 2 s while it trains; a smoothing or a zoom asks for the series again (page.js's Charts:
// /api/run/ID/series, the server averaging every point the run logged, thinned to the zoom's range).
const series = {};  // metric → {entry, raw, line}: the chart and its two specs
let last = -1, polls = 0;
function chart(metric) {
  if (series[metric]) return series[metric];
  const canvas = el('canvas');
  const panel = el(
      'div', {class: 'panel curve', 'data-metric': metric}, el('h3', {}, metric), el('div', {class: 'chart'}, canvas));
  const reference = /\/baseline|parameters$|\/random\/|\/agglomerative\//.test(metric);
  const box = document.getElementById(reference ? 'references' : 'curves');
  const main = /^(train\/loss|test\/mse|test\/accuracy|test\/[^/]*f1)$/.test(metric);
  if (main)
    box.prepend(panel);
  else
    box.append(panel);
  const line = {borderWidth: 1.5, pointRadius: 0};  // (put() sets it: a radius function costs 10x the drawing)
  const raw = {kind: 'raw', points: []}, mean = {kind: 'line', points: []};
  const datasets = [
    Object.assign({label: metric + ' (raw)', data: [], borderColor: alpha('#1f77b4', 0.25)}, line),
    Object.assign({label: metric, data: [], borderColor: '#1f77b4'}, line)
  ];
  const entry = Charts.line(
      canvas, panel, metric, {type: 'line', data: {datasets}, options: curveOptions(false, yAxis(), false)},
      [raw, mean]);
  return series[metric] = {entry, raw, line: mean, datasets};
}
// An answer's series into the charts' specs (`query`: what was asked, its smoothing).
function put(list, query) {
  const smooth = Number(new URLSearchParams(query).get('smooth')) || 0;
  for (const c of list) {
    const s = chart(c.metric);
    if (c.step) s.raw.points = s.line.points = Charts.points(c);  // (not asked for: a smoothing alone)
    s.line.smoothed = c.smooth ? Charts.points(c.smooth) : null;
    s.line.smoothedAt = smooth;
    s.entry.panel.dataset.n = c.n;
    for (const d of s.datasets) d.pointRadius = s.raw.points.length < 3 ? 3 : 0;
  }
}
// Pictures: each kind as it was at the chosen step (its latest at or before it), a slider over
// the steps that have any; while nothing is chosen, the newest.
let pictureStep = null, pictureSteps = [], pictureArtifacts = [];
function showPictures(artifacts, refused) {
  pictureArtifacts = artifacts;
  const pngs = artifacts.filter(a => /\.png$/.test(a.file)), box = document.getElementById('pictures');
  const bar = document.getElementById('picture-steps');
  const steps = [...new Set(pngs.map(a => a.step ?? 0))].sort((a, b) => a - b);
  if (refused) return box.replaceChildren(el('div', {class: 'nodata'}, refused));  // a folder htm may not read
  if (!pngs.length) return box.replaceChildren(el('div', {class: 'nodata'}, 'No pictures yet.'));
  const at = pictureStep ?? steps[steps.length - 1];
  const src = a => `/artifact/${RUN}/${a.file.split('/').map(encodeURIComponent).join('/')}`;
  box.replaceChildren(...Pictures.at(pngs, at).map(
      a => Pictures.figure(src(a), a.kind, `${a.kind}, step ${a.step ?? ''}`, {'data-step': a.step ?? ''})));
  if (steps.length === pictureSteps.length) return;
  pictureSteps = steps;
  const slider = el('input', {type: 'range', id: 'picture-step', min: 0, max: steps.length - 1, step: 1});
  slider.value = steps.indexOf(at);
  const label = el('span', {class: 'muted'}, `step ${at} (${steps.length} with pictures)`);
  slider.addEventListener('input', () => {
    pictureStep = steps[Number(slider.value)];
    label.textContent = `step ${pictureStep} (${steps.length} with pictures)`;
    showPictures(pictureArtifacts);
  });
  bar.replaceChildren(...(steps.length > 1 ? [el('label', {class: 'muted'}, 'step ', slider), ' ', label] : []));
}
async function poll() {
  const query = Charts.query();
  const D = await get(`/api/run/${RUN}?${query}${polls ? '&after=1' : ''}`);  // settings: the first time only
  const r = D.run;
  if (D.params) {
    document.getElementById('title').textContent = `Run ${r.id}: ${r.experiment} / ${r.variant}, seed ${r.seed ?? ''}`;
    const t = el(
        'table', {}, ...D.params.map(([k, v]) => el('tr', {}, el('td', {}, k), el('td', {class: 'wrap'}, setting(v)))));
    document.getElementById('settings').replaceChildren(t);
  }
  const about = document.getElementById('about');
  about.replaceChildren(
      el('span', {class: STATUS_CLASS[r.status] || '', id: 'status'}, r.status),
      ` · started ${day(r.started)} UTC · ${span(r.ended - r.started)} · git ${r.git}` +
          ` · config ${r.config_hash}` +
          ` · uuid ${r.uuid}` + (r.tags ? ` · tags ${r.tags}` : '') + ' · ',
      el('a', {href: '/study/' + encodeURIComponent(r.experiment)}, 'study'));
  if (r.error) about.append(el('div', {class: 'bad'}, r.error));
  if (polls === 0) {  // the controls, with the x axes this run's rows allow
    const axes = Charts.axesOf(D.series.flatMap(c => Charts.points(c)));
    Charts.bar(document.getElementById('controls'), axes.includes('time') ? axes : ['step', 'time']);
    Charts.source(async q => {
      const S = await get(`/api/run/${RUN}/series?${q}`);
      return () => put(S.series, q);
    });
  }
  if (D.last !== last) {  // what it logged since: the answers kept are out of date
    Charts.source(null);
    put(D.series, query);
    if (polls) Object.values(series).forEach(s => Charts.apply(s.entry));
    last = D.last;
  }
  showPictures(D.artifacts, D.artifacts_refused);
  const none = (id, text) => document.getElementById(id).replaceChildren(el('div', {class: 'nodata'}, text));
  if (!Object.keys(series).length) none('curves', 'No metrics logged yet.');
  document.body.dataset.points = D.series.reduce((n, c) => n + c.total, 0);
  document.body.dataset.status = r.status;
  document.body.dataset.polls = ++polls;
  document.body.dataset.ready = 'yes';
  if (polls === 1)  // every chart drawn: the time the browser tests measure
    Charts.drawn().then(() => {
      performance.mark('htm-drawn');
      document.body.dataset.drawn = 'yes';
    });
  if (r.status === 'running') setTimeout(poll, 2000);
}
poll().catch(e => {
  report(e.message);
  document.body.dataset.ready = 'yes';
});
