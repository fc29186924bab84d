'use strict';
// htm report's page, and htm serve's study page: after page.js, with Chart.js and the study's
// JSON (#data) before it.
// render(D) draws the whole page from report_data's JSON; `htm serve` calls it again with fresh
// data while a study trains, so each section empties its container first.
let D = null;
const color = v => COLORS[D.variants.indexOf(v) % COLORS.length];
const nodata = text => el('div', {class: 'nodata'}, text);
let charts = 0, renders = 0;
// What a reader chose that a redraw keeps (htm serve's page redraws while its study trains): the
// metrics switched from a log to a linear axis, and each variant's picture seed and step.
const Chosen = {
  linear: new Set(),
  pictures: new Map()
};

// Per-seed lines (htm serve's study page): every run's own curve, thin, in its variant's colour, read
// from /api/run/ID/series the first time they are asked for, kept while the page redraws.
const SeedLines = {
  on: false,
  rows: null,     // run id → metric → points
  async load() {  // each run's series thinned to 400 points, as the study's own curves
    this.rows = {};
    await Promise.all(D.runs.map(async r => {
      const response = await fetch(`/api/run/${r.id}/series?points=400`);
      const page = await response.json();
      if (!response.ok) throw new Error(page.error || response.statusText);
      this.rows[r.id] = Object.fromEntries(page.series.map(c => [c.metric, Charts.points(c)]));
    }));
  },
  async show(on) {
    this.on = on;
    if (on && !this.rows) await this.load();
    await Charts.drawn();
    let lines = 0;
    for (const entry of Charts.entries) {
      const {chart, specs, metric} = entry;
      if (!chart) continue;  // a curve not read yet (Deferred shows the lines once it is)
      for (let i = specs.length - 1; i >= 0; i--)
        if (specs[i].kind === 'seed') specs.splice(i, 1), chart.data.datasets.splice(i, 1);
      if (on)
        for (const r of D.runs) {
          const points = (this.rows[r.id] || {})[metric];
          if (!points) continue;
          chart.data.datasets.push({
            label: `run ${r.id} (${r.variant}, seed ${r.seed})`,
            data: [],
            borderColor: alpha(color(r.variant), 0.45),
            borderWidth: 0.8,
            pointRadius: 0
          });
          specs.push({kind: 'seed', points});
          lines++;
        }
      Charts.apply(entry);
    }
    document.body.dataset.seedLines = lines;
  }
};

// The curves a study page of htm serve names but did not send (every metric but the first
// screen's and their references): read in one request as the page shows, each drawn by `draw`
// (render()'s) into the panel that waited for it.
const Deferred = {
  slots: new Map(),  // metric → {canvas, head, panel, entry}
  async load(drawing, draw) {
    if (!this.slots.size) return;
    const response = await fetch(`/api/study/${encodeURIComponent(D.experiment)}/curves`);
    const data = await response.json();
    if (!response.ok) throw new Error(data.error || response.statusText);
    if (drawing !== renders) return;  // the page was drawn again meanwhile
    for (const c of data.curves) {
      const slot = this.slots.get(c.metric);
      if (!slot) continue;
      this.slots.delete(c.metric);
      delete slot.panel.dataset.deferred;
      draw(c, slot);
    }
    for (const slot of this.slots.values())  // logged, but never a number
      slot.canvas.replaceWith(nodata('No values were logged.'));
    this.slots.clear();
    if (SeedLines.on) await SeedLines.show(true);
  }
};

// The page drawn again keeps the keyboard focus where it was (page.js's keepFocus).
const render = data => keepFocus(() => drawPage(data));
function drawPage(data) {
  D = data;
  for (const chart of Object.values(Chart.instances)) chart.destroy();
  Charts.clear();
  charts = 0;
  for (const id of ['header', 'differs', 'finals', 'curves', 'more-curves', 'pictures'])
    document.getElementById(id).replaceChildren();

  // ---- header
  (() => {
    const h = document.getElementById('header');
    const count = {};
    for (const r of D.runs) count[r.status] = (count[r.status] || 0) + 1;
    const dates = D.runs.map(r => r.started).filter(x => x !== null);
    const day = t => new Date(t * 1000).toISOString().replace('T', ' ').slice(0, 16);
    const gits = [...new Set(D.runs.map(r => r.git).filter(g => g))];
    h.append(el('h1', {}, 'htm report: ' + D.experiment));
    if (D.description) h.append(el('p', {}, D.description));
    h.append(
        el('p', {class: 'muted'},
           `${plural(D.runs.length, 'run')} of ${plural(D.variants.length, 'variant')}, ` +
               Object.entries(count).map(([s, n]) => `${n} ${s}`).join(', ') +
               (dates.length ? `; ${day(Math.min(...dates))} to ${day(Math.max(...dates))} UTC` : '') +
               `; git ${gits.join(', ') || 'unknown'}; database ${D.database}`));
    h.append(
        el('div', {class: 'chips'},
           ...D.plugins.map(p => el('span', {title: p[3] ? 'sha256 ' + p[3] : ''}, `${p[0]} ${p[1]} ${p[2]}`))));
    const tags = [...new Set(D.runs.map(r => r.tags).filter(t => t))];
    if (tags.length) h.append(el('p', {class: 'muted'}, 'tags: ' + tags.join('; ')));
    const failed = D.runs.filter(r => r.status === 'failed' || r.status === 'killed');
    if (failed.length) {
      const t =
          el('table', {id: 'failed'},
             el('tr', {}, el('th', {}, 'run'), el('th', {}, 'variant'), el('th', {}, 'seed'), el('th', {}, 'status'),
                el('th', {}, 'error')));
      for (const r of failed)
        t.append(
            el('tr', {}, el('td', {}, r.id), el('td', {}, r.variant), el('td', {}, r.seed),
               el('td', {class: 'bad'}, r.status), el('td', {}, r.error)));
      h.append(el('h2', {}, 'Runs that did not finish'), t);
    }
  })();

  // ---- what differs
  (() => {
    const box = document.getElementById('differs');
    if (!D.differs.keys.length) {
      box.append(
          nodata(D.variants.length < 2 ? 'One variant: nothing to compare.' : 'The variants share every setting.'));
      return;
    }
    const t =
        el('table', {},
           el('tr', {}, el('th', {}, 'setting'), ...D.variants.map(v => el('th', {style: `color:${color(v)}`}, v))));
    D.differs.keys.forEach(
        (k, i) => t.append(el('tr', {}, el('td', {}, k), ...D.differs.values[i].map(x => el('td', {}, setting(x))))));
    const same = D.differs.same === 1 ? '1 other setting is' : `${D.differs.same} other settings are`;
    box.append(t, el('p', {class: 'muted'}, `${same} equal in every variant.`));
  })();

  // ---- final values: htm compare's tables, phase by phase, and the seeds' values beside each
  // variant's mean and its one-sided bound against the target
  (() => {
    const box = document.getElementById('finals');
    if (location.protocol !== 'file:' && D.finals.length && D.finals[0].reference) {  // htm serve: ?reference=
      const pick = el('select', {id: 'reference'}, ...D.variants.map(v => el('option', {value: v}, v)));
      pick.value = D.finals[0].reference;
      pick.addEventListener('change', () => {
        const q = new URLSearchParams(location.search);
        q.set('reference', pick.value);
        location.search = q.toString();
      });
      box.append(
          el('p', {}, el('label', {class: 'muted'}, 'reference variant ', pick),
             el('span', {class: 'muted'}, '  Variants are listed best mean first (★).')));
    }
    for (const w of D.warnings) box.append(el('p', {class: 'bad warning'}, 'warning: ' + w));
    const grid = el('div', {class: 'grid'});
    box.append(D.finals.length ? grid : nodata('No metric to compare.'));  // in the page before charts are drawn
    const PHASE = {
      explore: 'Exploration: the seeds variants were chosen on (for choosing, not for claims)',
      confirm: 'Confirmation: htm run --confirm, seeds no variant was chosen on'
    };
    for (const f of D.finals) {
      const panel =
          el('div', {class: 'panel final', 'data-metric': f.metric},
             el('h3', {}, f.metric + (f.target ? '  (target ' + f.target.text + ')' : '')));
      grid.append(panel);
      if (f.missing) {
        panel.append(nodata(f.missing));
        continue;
      }
      for (const ph of f.phases) {
        const seeds = [...new Set(ph.rows.flatMap(r => r.seeds))].sort((a, b) => a - b);
        panel.append(
            el('h4', {class: 'phase', 'data-phase': ph.phase}, `${PHASE[ph.phase]}; seeds ${seeds.join(', ')}`));
        const heads = [
          'variant', 'n', 'mean', 'sd', 'diff vs ' + f.reference, 'effect % [95% CI]', 'test', 'p', `p (${f.adjust})`
        ];
        if (f.target) heads.push((f.target.at_least ? 'lower' : 'upper') + ' 95% bound');
        if (ph.rows.some(r => r.collapsed >= 0)) heads.push('collapsed');
        const t = el('table', {class: 'compare'}, el('tr', {}, ...heads.map(c => el('th', {}, c))));
        // Best mean first: higher for accuracies and F1s, lower for losses and errors.
        const up = higherIsBetter(f.metric), key = r => r.mean === null ? Infinity : up ? -r.mean : r.mean;
        const rows = ph.rows.slice().sort((a, b) => key(a) - key(b));
        for (const r of rows) {
          const best = r === rows[0] && rows.length > 1 && r.mean !== null;
          const cells = [
            el('td', {style: `color:${color(r.variant)}`}, r.variant), el('td', {class: 'num'}, r.n),
            el('td', {class: 'num'}, fmt(r.mean)), el('td', {class: 'num'}, fmt(r.sd, 3)),
            el('td', {class: 'num'}, r.tested ? fmt(r.diff) : ''),
            el('td', {class: 'num'},
               r.tested && r.effect !== null ?  // no interval from one seed: the effect alone, and why
                   fmt(r.effect, 3) +
                       (r.effect_low !== null && r.effect_high !== null ?
                            ` [${fmt(r.effect_low, 3)}, ${fmt(r.effect_high, 3)}]` :
                            ` (n=${Math.min(r.n, ...ph.rows.filter(x => x.reference).map(x => x.n))})`) :
                            ''),
            el('td', {}, r.reference ? '(reference)' : r.test), el('td', {class: 'num'}, r.tested ? fmt(r.p, 3) : ''),
            el('td', {class: 'num'}, r.tested ? fmt(r.p_adjusted, 3) : '')
          ];
          if (f.target)
            cells.push(
                el('td', {class: 'num ' + (r.met ? '' : 'bad')},
                   r.bound === null ? '' : `${fmt(r.bound, 4)} ${r.met ? 'met' : 'not met'}`));
          if (r.collapsed >= 0) cells.push(el('td', {class: 'num'}, `${r.collapsed} of ${r.n}`));
          t.append(el('tr', {'data-variant': r.variant, class: best ? 'best' : ''}, ...cells));
        }
        const canvas = el('canvas');
        panel.append(el('div', {class: 'final-body'}, t, el('div', {class: 'chart'}, canvas)));
        if (ph.family) {  // why htm compare with one --metric gives other adjusted p
          const flags = D.finals.map(g => '--metric ' + g.metric).join(' ');
          panel.append(
              el('p', {class: 'muted family'},
                 `p (${f.adjust}): adjusted over the ${ph.family} comparisons of this phase, every variant against ` +
                     `the reference on each of the ${D.finals.length} metric(s) of this page; htm compare adjusts ` +
                     `over the metrics it is given, so "htm compare ${D.experiment} ${flags}" gives these p, and ` +
                     `one --metric alone a smaller family.`));
        }
        const dot = (i, k, n) => i + (k - (n - 1) / 2) * Math.min(0.08, 0.6 / n);
        const datasets = [
          {
            label: 'seeds',
            data: rows.flatMap((r, i) => r.values.map((y, k) => ({x: dot(i, k, r.values.length), y}))),
            pointRadius: 4,
            backgroundColor: rows.flatMap(r => r.values.map(() => alpha(color(r.variant), 0.7)))
          },
          {
            label: 'mean',
            data: rows.map((r, i) => ({x: i, y: r.mean})),
            pointStyle: 'line',
            pointRadius: 16,
            borderWidth: 2,
            borderColor: '#222',
            backgroundColor: '#222'
          }
        ];
        if (f.target) {
          datasets.push({
            label: '95% bound',
            data: rows.map((r, i) => ({x: i, y: r.bound})),
            pointStyle: 'triangle',
            rotation: f.target.at_least ? 0 : 180,
            pointRadius: 7,
            backgroundColor: rows.map(r => r.met ? '#2ca02c' : '#b00020')
          });
          datasets.push({
            label: 'target',
            type: 'line',
            data: [{x: -0.5, y: f.target.threshold}, {x: rows.length - 0.5, y: f.target.threshold}],
            borderColor: '#b00020',
            borderDash: [6, 4],
            borderWidth: 1.5,
            pointRadius: 0
          });
        }
        Charts.soon(canvas, () => new Chart(canvas, {
                              type: 'scatter',
                              data: {datasets},
                              options: {
                                animation: false,
                                maintainAspectRatio: false,
                                plugins: {legend: {display: !!f.target, labels: {boxWidth: 12}}},
                                scales: {
                                  x: {
                                    min: -0.5,
                                    max: rows.length - 0.5,
                                    grid: {display: false},
                                    afterBuildTicks: axis => {
                                      axis.ticks = rows.map((_, i) => ({value: i}));
                                    },
                                    ticks: {autoSkip: false, callback: v => (rows[v] || {}).variant || ''}
                                  },
                                  y: {title: {display: true, text: f.metric}}
                                }
                              }
                            }));
        charts++;
      }
    }
  })();

  // ---- curves
  const REFERENCES = {
    // curve → reference metrics drawn as dashed lines
    'test/mse': [['test/baseline_mse', 'mean image'], ['test/baseline/pca_mse', 'PCA, same size']],
    'test/accuracy': [['test/baseline/linear_accuracy', 'linear classifier']],
  };
  const byMetric = Object.fromEntries(D.curves.filter(c => c.series).map(c => [c.metric, c]));
  const referencesOf = m => {
    const refs = (REFERENCES[m] || []).slice();
    const [split, ...rest] = m.split('/');
    const name = rest.join('/');
    refs.push([`${split}/random/${name}`, 'random floor'], [`${split}/agglomerative/${name}`, 'agglomerative ceiling']);
    return refs.filter(([r]) => byMetric[r] && r !== m).map(([r, label]) => {
      const s = byMetric[r].series[0];
      return {label, value: s.mean[s.mean.length - 1]};
    });
  };
  const pointsOf = (s, ys) =>
      s.step.map((step, i) => ({step, time: s.time ? s.time[i] : null, epoch: s.epoch ? s.epoch[i] : null, y: ys[i]}));
  // A curve's panel; one the page has only by name (c.deferred: htm serve sends the first screen's
  // curves with the page) waits, joined to the controls, for Deferred to fill it.
  function curve(c, box) {
    const canvas = el('canvas');
    const head = el('h3', {}, c.metric);
    const panel = el('div', {class: 'panel curve', 'data-metric': c.metric}, head, el('div', {class: 'chart'}, canvas));
    box.append(panel);
    if (c.deferred) {
      panel.dataset.deferred = 'yes';
      Deferred.slots.set(c.metric, {canvas, head, panel, entry: Charts.later(panel, c.metric)});
      return;
    }
    draw(c, {canvas, head, panel, entry: null});
  }
  function draw(c, {canvas, head, panel, entry: slot}) {
    const datasets = [], specs = [];
    // A reference every variant shares (a random floor, the data's own ceiling) is drawn once: five
    // equal translucent bands on top of each other would read as one opaque box.
    const same = c.series.length > 1 &&
        c.series.every(
            s => JSON.stringify([s.step, s.mean, s.lo, s.hi]) ===
                JSON.stringify([c.series[0].step, c.series[0].mean, c.series[0].lo, c.series[0].hi]));
    if (same) panel.dataset.shared = 'yes';
    for (const s of same ? [Object.assign({}, c.series[0], {variant: 'every variant', shared: true})] : c.series) {
      const col = s.shared ? '#555555' : color(s.variant), mean = pointsOf(s, s.mean);
      datasets.push(
          {label: s.variant + ' min', data: [], borderWidth: 0, pointRadius: 0, fill: false}, {
            label: s.variant + ' max',
            data: [],
            borderWidth: 0,
            pointRadius: 0,
            fill: '-1',
            backgroundColor: alpha(col, 0.18)
          },
          {label: s.variant + ' raw', data: [], borderColor: alpha(col, 0.3), borderWidth: 1, pointRadius: 0}, {
            label: s.variant,
            data: [],
            borderColor: col,
            backgroundColor: col,
            borderWidth: 1.5,
            pointRadius: s.step.length < 3 ? 3 : 0
          });
      specs.push(
          {kind: 'band', points: pointsOf(s, s.lo)}, {kind: 'band', points: pointsOf(s, s.hi)},
          {kind: 'raw', points: mean}, {kind: 'line', points: mean});
    }
    for (const r of referencesOf(c.metric)) {  // across the whole run, even when the curve has one point
      datasets.push(
          {label: r.label, data: [], borderColor: '#555', borderDash: [6, 4], borderWidth: 1, pointRadius: 0});
      specs.push({kind: 'ref', y: r.value});
    }
    const entry = Charts.line(
        canvas, panel, c.metric, {
          type: 'line',
          data: {datasets},
          options: curveOptions(
              {filter: i => !/ (min|max|raw)$|^run \d/.test(i.text)},
              yAxis({type: c.log && !Chosen.linear.has(c.metric) ? 'logarithmic' : 'linear'}))
        },
        specs, slot);
    if (c.log) {  // a metric spanning decades starts on a log scale, with a switch
      const box = el('input', {type: 'checkbox'});
      box.checked = !Chosen.linear.has(c.metric);
      box.addEventListener('change', () => {
        if (box.checked)
          Chosen.linear.delete(c.metric);
        else
          Chosen.linear.add(c.metric);
        if (!entry.chart) return;
        entry.chart.options.scales.y.type = box.checked ? 'logarithmic' : 'linear';
        entry.chart.update();
      });
      head.append(el('label', {class: 'muted'}, box, ' log'));
    }
    charts++;
  }
  (() => {
    const box = document.getElementById('curves'), more = document.getElementById('more-curves');
    const points = D.curves.filter(c => c.series).flatMap(c => c.series.flatMap(s => pointsOf(s, s.mean)));
    const extra = [];
    // htm serve: each seed's own line, read from the server when asked; the control made once (the bar
    // keeps its elements across redraws)
    if (location.protocol !== 'file:') {
      if (!SeedLines.control) {
        const seeds = el('input', {type: 'checkbox', id: 'seed-lines'});
        seeds.checked = SeedLines.on;
        seeds.addEventListener('change', () => SeedLines.show(seeds.checked));
        SeedLines.control = el('label', {}, seeds, ' per-seed lines');
      }
      extra.push(SeedLines.control);
    }
    Charts.bar(document.getElementById('controls'), Charts.axesOf(points), ...extra);
    if (!D.curves.length) box.append(nodata('These runs logged no metrics.'));
    Deferred.slots.clear();
    for (const c of D.curves.filter(c => c.main)) curve(c, box);
    for (const c of D.curves.filter(c => !c.main)) curve(c, more);
    if (SeedLines.on) SeedLines.show(true);
  })();

  // ---- pictures: per variant, a seed picker over the runs whose pictures the page holds
  (() => {
    const box = document.getElementById('pictures');
    if (!D.pictures.length) box.append(nodata('No pictures were recorded.'));
    for (const variant of D.variants) {
      const mine = D.pictures.filter(p => p.variant === variant);
      if (!mine.length) continue;
      const runs = [...new Set(mine.map(p => p.run))];
      const figures = el('div', {class: 'grid'}), steps = el('span', {class: 'picture-steps'});
      // Each kind as it was at the chosen step (its latest at or before it); a slider over the
      // steps with pictures when there are several (htm serve lists each step's, a file its last).
      const chosen = Chosen.pictures.get(variant) || {};  // a step chosen on the slider stays; else the latest
      Chosen.pictures.set(variant, chosen);
      const show = run => {
        const own = mine.filter(p => p.run === run), all = [...new Set(own.map(p => p.step))].sort((a, b) => a - b);
        const at = all.includes(chosen.step) ? chosen.step : all[all.length - 1];
        const label = el('span', {class: 'muted'});
        const draw = at => {
          figures.replaceChildren(...Pictures.at(own, at).map(p => {  // by kind; a click enlarges one
            const caption = `${p.kind} (run ${p.run}, seed ${p.seed}, step ${p.step})`;
            return p.src ? Pictures.figure(p.src, p.kind, caption) :  // refused: a folder htm may not read
                el('figure', {}, nodata(p.refused || 'missing file: ' + p.path), el('figcaption', {}, caption));
          }));
          label.textContent = ` ${at} (${all.length} steps with pictures)`;
        };
        steps.replaceChildren();
        if (all.length > 1) {
          const slider = el('input', {type: 'range', class: 'picture-step', min: 0, max: all.length - 1, step: 1});
          slider.value = all.indexOf(at);
          slider.addEventListener('input', () => draw(chosen.step = all[Number(slider.value)]));
          steps.append(' step ', slider, label);
        }
        draw(at);
      };
      const picker =
          el('select', {class: 'seed-picker', 'aria-label': variant + ' seed'},
             ...runs.map(run => el('option', {value: run}, 'seed ' + mine.find(p => p.run === run).seed)));
      picker.addEventListener('change', () => {
        chosen.run = Number(picker.value);
        show(chosen.run);
      });
      const run = runs.includes(chosen.run) ? chosen.run : runs[0];
      picker.value = run;
      box.append(
          el('div', {class: 'panel pictures', 'data-variant': variant, style: 'grid-column: 1 / -1'},
             el('h3', {}, el('span', {style: `color:${color(variant)}`}, variant), picker, steps), figures));
      show(run);
    }
  })();
  // A self-check the browser tests read, once every chart is drawn: how many charts were drawn, and
  // how many canvases stayed blank (every pixel transparent).
  const drawing = ++renders;
  Deferred.load(drawing, draw).then(() => Charts.drawn()).then(() => {
    if (drawing !== renders) return;  // drawn again meanwhile (a study that trains)
    const blank = [...document.querySelectorAll('canvas')]
                      .filter(c => {
                        if (!c.width || !c.height) return true;  // never laid out: as good as blank
                        const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
                        for (let i = 3; i < px.length; i += 4)
                          if (px[i] !== 0) return false;
                        return true;
                      })
                      .length;
    document.body.dataset.charts = charts;
    document.body.dataset.canvases = document.querySelectorAll('canvas').length;
    document.body.dataset.blank = blank;
    document.body.dataset.ready = 'yes';
    document.body.dataset.renders = Number(document.body.dataset.renders || 0) + 1;
  });
}
render(JSON.parse(document.getElementById('data').textContent));
