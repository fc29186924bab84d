'use strict';
// RUN, the run's id, is set before this script (serve_pages.cpp).
const series = {};  // metric → {entry, points}
let last = 0, points = 0, polls = 0, started = 0;
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
  const line = {borderWidth: 1.5, pointRadius: ctx => ctx.dataset.data.length < 3 ? 3 : 0};
  const c = new Chart(canvas, {
    type: 'line',
    data: {
      datasets: [
        Object.assign({label: metric + ' (raw)', data: [], borderColor: alpha('#1f77b4', 0.25)}, line),
        Object.assign({label: metric, data: [], borderColor: '#1f77b4'}, line)
      ]
    },
    options: curveOptions(false)
  });
  const data = [];
  return series[metric] = {
    entry: Charts.add(c, panel, metric, [{kind: 'raw', points: data}, {kind: 'line', points: data}]),
    data
  };
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
  const at = pictureStep ?? steps[steps.length - 1], shown = {};
  for (const a of pngs)  // the route lists them by step
    if ((a.step ?? 0) <= at) shown[a.kind] = a;
  const src = a => `/artifact/${RUN}/${a.file.split('/').map(encodeURIComponent).join('/')}`;
  box.replaceChildren(...Object.values(shown).map(
      a =>
          el('figure', {'data-step': a.step ?? ''}, el('img', {src: src(a), alt: a.kind, loading: 'lazy'}),
             el('figcaption', {class: 'muted'}, `${a.kind}, step ${a.step ?? ''}`))));
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
// The rows come 100,000 a request (the most the route gives), the charts drawn again once the last of
// a batch is in; a smoothing, x axis or zoom change redraws from the rows the page holds (no request).
const touched = new Set();
async function poll() {
  const D = await get(`/api/run/${RUN}?after=${last}&limit=100000`);
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
    started = r.started || 0;
    const axes = Charts.axesOf(D.metrics.map(([, , step, , time, epoch]) => ({step, time, epoch})));
    Charts.bar(document.getElementById('controls'), axes.includes('time') ? axes : ['step', 'time']);
  }
  for (const [rowid, metric, step, value, time, epoch] of D.metrics) {
    if (value === null) continue;
    const s = chart(metric);
    s.data.push({step, time: time - started, epoch, y: value});
    touched.add(s);
    points++;
  }
  if (!D.more) {
    for (const s of touched) Charts.apply(s.entry);
    touched.clear();
  }
  last = D.last;
  showPictures(D.artifacts, D.artifacts_refused);
  const none = (id, text) => document.getElementById(id).replaceChildren(el('div', {class: 'nodata'}, text));
  if (!Object.keys(series).length) none('curves', 'No metrics logged yet.');
  document.body.dataset.points = points;
  document.body.dataset.status = r.status;
  document.body.dataset.polls = ++polls;
  document.body.dataset.ready = 'yes';
  if (D.more)
    setTimeout(poll, 0);
  else if (r.status === 'running')
    setTimeout(poll, 2000);
}
poll().catch(e => {
  report(e.message);
  document.body.dataset.ready = 'yes';
});
