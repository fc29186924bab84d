'use strict';
// htm serve's compare page: the runs in the address (?runs=3,7,12, from any studies), each a colour;
// per metric one chart with every run's curve over it (the chart controls of page.js), and their
// settings side by side, those that differ first.
const ids = [...new Set((new URLSearchParams(location.search).get('runs') || '').split(',').map(Number))]
                .filter(n => Number.isInteger(n) && n > 0)
                .slice(0, 50);
const MAIN = /^(train\/loss|test\/mse|test\/accuracy|test\/[^/]*f1|train\/epoch_loss)$/;
// A run in one request: its record, settings, pictures and series thinned for the charts (page.js's
// Charts reads the series again for a smoothing or a zoom: /api/run/ID/series, every run at once).
// Its tags (those it recorded, and those given it from the pages: its own first where both name a
// key, as tag.NAME on the runs table) are compared as settings named tag.KEY.
async function load(id) {
  const [D, N] =
      await Promise.all([get(`/api/run/${id}?${Charts.query()}`), get(`/api/run/${id}/notes`).catch(() => null)]);
  const tags = Object.entries(N ? {...N.tags, ...N.own_tags} : {}).map(([k, v]) => ['tag.' + k, v]);
  return {
    run: D.run,
    params: [...(D.params || []), ...tags],
    series: D.series,
    artifacts: D.artifacts,
    refused: D.artifacts_refused
  };
}
// An answer's series into a run's specs (`query`: what was asked, its smoothing).
function put(r, list, query) {
  const smooth = Number(new URLSearchParams(query).get('smooth')) || 0;
  for (const c of list) {
    const [raw, line] = r.specs[c.metric] || [];
    if (!raw) continue;
    if (c.step) raw.points = line.points = Charts.points(c);  // (not asked for: a smoothing alone)
    Object.assign(line, {smoothed: c.smooth ? Charts.points(c.smooth) : null, smoothedAt: smooth});
  }
}
const lineOf = i => ({color: COLORS[i % COLORS.length], dash: i >= COLORS.length ? [6, 3] : []});
function legend(runs) {
  const finals = ['test/mse', 'test/accuracy', 'test/cluster_f1', 'test/sibling_f1'].filter(
      m => runs.some(r => r.final[m] !== undefined));
  const t =
      el('table', {id: 'compare-runs'},
         el('tr', {}, el('th', {}, ''), el('th', {}, 'run'), el('th', {}, 'experiment'), el('th', {}, 'variant'),
            el('th', {}, 'seed'), el('th', {}, 'status'), ...finals.map(m => el('th', {}, m)), el('th', {}, '')));
  runs.forEach((r, i) => {
    const rest = ids.filter(id => id !== r.run.id).join(',');
    t.append(
        el('tr', {'data-run': r.run.id},
           el('td', {}, el('span', {class: 'swatch', style: `background:${lineOf(i).color}`})),
           el('td', {}, el('a', {href: '/run/' + r.run.id}, String(r.run.id))),
           el('td', {}, el('a', {href: '/study/' + encodeURIComponent(r.run.experiment)}, r.run.experiment)),
           el('td', {}, r.run.variant), el('td', {class: 'num'}, r.run.seed ?? ''),
           el('td', {class: STATUS_CLASS[r.run.status] || ''}, r.run.status),
           ...finals.map(m => el('td', {class: 'num'}, fmt(r.final[m]))),
           el('td', {}, el('a', {href: '/compare?runs=' + rest, class: 'muted'}, 'remove'))));
  });
  document.getElementById('legend').replaceChildren(t);
}
function charts(runs) {
  const metrics = [...new Set(runs.flatMap(r => Object.keys(r.points)))].sort(
      (a, b) => (MAIN.test(b) - MAIN.test(a)) || a.localeCompare(b));
  const box = document.getElementById('curves');
  if (!metrics.length) box.append(el('div', {class: 'nodata'}, 'These runs logged no metrics.'));
  for (const metric of metrics) {
    const canvas = el('canvas');
    const panel =
        el('div', {class: 'panel curve', 'data-metric': metric}, el('h3', {}, metric),
           el('div', {class: 'chart'}, canvas));
    box.append(panel);
    const datasets = [], specs = [];
    runs.forEach((r, i) => {
      const points = r.points[metric];
      if (!points) return;
      const {color, dash} = lineOf(i), radius = points.length < 3 ? 3 : 0;
      const label = `run ${r.run.id} ${r.run.variant}`;
      datasets.push(
          {label: label + ' (raw)', data: [], borderColor: alpha(color, 0.25), borderWidth: 1, pointRadius: 0});
      const spec = r.specs[metric] = [{kind: 'raw', points}, {kind: 'line', points}];
      specs.push(spec[0]);
      datasets.push({
        label,
        data: [],
        borderColor: color,
        backgroundColor: color,
        borderDash: dash,
        borderWidth: 1.5,
        pointRadius: radius
      });
      specs.push(spec[1]);
    });
    panel.dataset.lines = specs.filter(s => s.kind === 'line').length;
    Charts.line(
        canvas, panel, metric, {
          type: 'line',
          data: {datasets},
          options: curveOptions({filter: i => !/\(raw\)$/.test(i.text)}, yAxis(), false)
        },
        specs);
  }
  return metrics.length;
}
// Each run's pictures side by side, a row a kind (by name), every run at one step: a slider over the
// steps any run has pictures at, each run showing those of its nearest step (a run that drew pictures
// at other steps: its closest). Returns how many runs have pictures.
function pictures(runs) {
  const own = runs.map((r, i) => {
    const pngs = (r.artifacts || []).filter(a => /\.png$/.test(a.file));
    return {r, i, pngs, steps: [...new Set(pngs.map(a => a.step ?? 0))].sort((a, b) => a - b)};
  });
  const all = [...new Set(own.flatMap(o => o.steps))].sort((a, b) => a - b);
  const box = document.getElementById('pictures'), bar = document.getElementById('picture-bar');
  if (!all.length) {
    box.replaceChildren(el('div', {class: 'nodata'}, 'None of these runs has pictures.'));
    return 0;
  }
  const kinds = [...new Set(own.flatMap(o => o.pngs.map(a => a.kind)))].sort();
  const src = (r, a) => `/artifact/${r.run.id}/${a.file.split('/').map(encodeURIComponent).join('/')}`;
  const draw = at => {
    const grid =
        el('div', {class: 'picture-runs', style: `grid-template-columns: repeat(${own.length}, minmax(0, 1fr))`});
    const steps = own.map(o => o.steps.length ? Pictures.nearest(o.steps, at) : null);
    own.forEach(
        ({r, i}, k) => grid.append(el(
            'div', {class: 'picture-head', 'data-run': r.run.id, 'data-step': steps[k] ?? ''},
            el('span', {class: 'swatch', style: `background:${lineOf(i).color}`}), ` run ${r.run.id} ${r.run.variant}`,
            el('span', {class: 'muted'}, steps[k] === null ? ' (no pictures)' : ` · step ${steps[k]}`))));
    for (const kind of kinds) {
      grid.append(el('h3', {class: 'picture-kind'}, kind));
      own.forEach(({r, pngs}, k) => {
        const a = steps[k] === null ? null : Pictures.at(pngs, steps[k]).find(a => a.kind === kind);
        grid.append(
            a ? Pictures.figure(
                    src(r, a), kind, `run ${r.run.id}, step ${a.step ?? ''}`,
                    {'data-run': r.run.id, 'data-step': a.step ?? ''}) :
                el('div', {class: 'nodata', 'data-run': r.run.id}, r.refused || `no ${kind}`));
      });
    }
    box.replaceChildren(grid);
    label.textContent = `step ${at} (each run: its nearest step with pictures)`;
  };
  const label = el('span', {class: 'muted'});
  const slider = el('input', {type: 'range', id: 'picture-step', min: 0, max: all.length - 1, step: 1});
  slider.value = all.length - 1;
  slider.addEventListener('input', () => draw(all[Number(slider.value)]));
  bar.replaceChildren(...(all.length > 1 ? [el('label', {class: 'muted'}, 'step ', slider), ' '] : []), label);
  draw(all[all.length - 1]);
  return own.filter(o => o.steps.length).length;
}
// experiment.* (a study's name, seeds, description) and runtime.* (paths, threads) never change a
// result: they are listed with the settings that are equal, not as differing. In a row that differs,
// the cells in bold are those unlike the row's most common value (the first run's, on a tie).
const compared = k => !/^(experiment|runtime)\./.test(k);
function settings(runs) {
  const values = runs.map(r => Object.fromEntries(r.params));
  const keys = [...new Set(runs.flatMap(r => r.params.map(([k]) => k)))].sort();
  const differs = k => compared(k) && new Set(values.map(v => v[k] ?? '(unset)')).size > 1;
  const usual = k => {
    const count = new Map();
    for (const v of values) count.set(v[k] ?? '(unset)', (count.get(v[k] ?? '(unset)') || 0) + 1);
    return [...count].reduce((a, b) => b[1] > a[1] ? b : a)[0];  // the first of the most common on a tie
  };
  const ordered = keys.filter(differs).concat(keys.filter(k => !differs(k)));
  const t =
      el('table', {id: 'settings-table'},
         el('tr', {}, el('th', {}, 'setting'),
            ...runs.map((r, i) => el('th', {style: `color:${lineOf(i).color}`}, `run ${r.run.id}`))));
  for (const k of ordered) {
    const d = differs(k), most = d ? usual(k) : null;
    const cell = v => {  // bold where unlike the row's usual value
      const style = !d ? 'muted' : (v[k] ?? '(unset)') !== most ? 'differs' : '';
      return el('td', {class: 'wrap ' + style}, v[k] === undefined ? '(unset)' : setting(v[k]));
    };
    t.append(
        el('tr', {'data-differs': d ? 'yes' : 'no', class: d ? '' : 'same'}, el('td', {}, k), ...values.map(cell)));
  }
  const all = document.getElementById('all-settings');
  const show = () => t.classList.toggle('only-differing', !all.checked);
  all.addEventListener('change', show);
  show();
  const n = keys.filter(differs).length, ignored = keys.filter(k => !compared(k)).length;
  document.getElementById('settings')
      .replaceChildren(
          el('p', {class: 'muted', id: 'settings-summary'},
             `${n} of ${plural(keys.length - ignored, 'setting')} ${n === 1 ? 'differs' : 'differ'}` +
                 ` (and ${ignored} experiment.* and runtime.*, not compared).`),
          t);
  return n;
}
(async () => {
  const summary = document.getElementById('summary');
  if (!ids.length) {
    summary.replaceChildren(
        el('div', {class: 'nodata', id: 'no-runs'},
           'No runs chosen: tick runs in the runs table, then "compare" (or open /compare?runs=3,7).'));
    document.body.dataset.ready = 'yes';
    return;
  }
  const back = document.querySelector('nav a[href="/"]');  // the runs table, with these runs ticked
  if (back) back.href = '/?sel=' + ids.slice().sort((a, b) => a - b).join(',');
  const runs = [], missing = [];
  for (const result of await Promise.allSettled(ids.map(load)))
    if (result.status === 'fulfilled')
      runs.push(result.value);
    else
      missing.push(result.reason.message);
  const query = Charts.query();
  for (const r of runs) {  // metric → points, and each metric's final value (its last point: always kept)
    r.points = {};
    r.final = {};
    r.specs = {};
    for (const c of r.series) {
      r.points[c.metric] = Charts.points(c);
      r.final[c.metric] = c.value[c.value.length - 1];
    }
  }
  const studies = new Set(runs.map(r => r.run.experiment)).size;
  summary.textContent = `${plural(runs.length, 'run')} from ${plural(studies, 'study', 'studies')}`;
  if (missing.length) summary.append(el('div', {class: 'bad', id: 'missing-runs'}, missing.join('; ')));
  legend(runs);
  Charts.bar(document.getElementById('controls'), Charts.axesOf(runs.flatMap(r => Object.values(r.points).flat())));
  document.body.dataset.charts = charts(runs);
  for (const r of runs) put(r, r.series, query);  // the smoothed lines that came with them
  Charts.source(async q => {
    const answers = await Promise.all(runs.map(r => get(`/api/run/${r.run.id}/series?${q}`)));
    return () => answers.forEach((S, k) => put(runs[k], S.series, q));
  });
  document.body.dataset.pictures = pictures(runs);
  document.body.dataset.differing = settings(runs);
  document.body.dataset.runs = runs.length;
  await Charts.drawn();
  document.body.dataset.ready = 'yes';
})();
