'use strict';
// RUN, the run's id, is set before this script (serve_pages.cpp).
const series = {};  // metric → {chart, points}
let last = 0, points = 0, polls = 0;
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
  const c = new Chart(canvas, {
    type: 'line',
    data: {
      datasets: [{
        label: metric,
        data: [],
        borderColor: '#1f77b4',
        borderWidth: 1.5,
        pointRadius: ctx => ctx.dataset.data.length < 3 ? 3 : 0
      }]
    },
    options: {
      animation: false,
      maintainAspectRatio: false,
      parsing: false,
      normalized: true,
      plugins: {legend: {display: false}},
      scales: {x: {type: 'linear', title: {display: true, text: 'step'}}, y: yAxis()}
    }
  });
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
  about.replaceChildren(
      el('span', {class: STATUS_CLASS[r.status] || '', id: 'status'}, r.status),
      ` · started ${day(Number(r.started))} UTC · ${span(Number(r.ended) - Number(r.started))} · git ${r.git}` +
          ` · config ${r.config_hash}` +
          ` · uuid ${r.uuid}` + (r.tags ? ` · tags ${r.tags}` : '') + ' · ',
      el('a', {href: '/study/' + encodeURIComponent(r.experiment)}, 'study'));
  if (r.error) about.append(el('div', {class: 'bad'}, r.error));
  const touched = new Set();
  for (const [rowid, metric, step, value] of D.metrics) {
    if (value === null) continue;
    const s = chart(metric);
    s.data.push({x: step, y: value});
    touched.add(s);
    points++;
  }
  for (const s of touched) s.chart.update('none');
  last = D.last;
  const latest = {};
  for (const a of D.artifacts)
    if (/\.png$/.test(a.file)) latest[a.kind] = a;
  document.getElementById('pictures')
      .replaceChildren(...Object.values(latest).map(
          a => el(
              'figure', {},
              el('img', {src: `/artifact/${RUN}/${a.file.split('/').map(encodeURIComponent).join('/')}`, alt: a.kind}),
              el('figcaption', {class: 'muted'}, `${a.kind}, step ${a.step ?? ''}`))));
  const none = (id, text) => document.getElementById(id).replaceChildren(el('div', {class: 'nodata'}, text));
  if (!Object.keys(latest).length) none('pictures', 'No pictures yet.');
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
