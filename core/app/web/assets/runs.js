'use strict';
const form = document.getElementById('filters');
const state = new URLSearchParams(location.search);
const multi = name => (state.get(name) || '').split(';').map(s => s.trim()).filter(s => s);
function url() {
  const q = new URLSearchParams();
  for (const k of ['experiment', 'status', 'size', 'page', 'sort', 'order', 'group', 'archived'])
    if (state.get(k)) q.set(k, state.get(k));
  for (const w of multi('where')) q.append('where', w);
  for (const c of multi('column')) q.append('column', c);
  if (state.get('chart-x') && state.get('chart-y'))
    for (const k of ['chart-x', 'chart-y', 'chart-colour'])
      if (state.get(k)) q.append('chart', state.get(k));
  return '/api/runs?' + q;
}
// A change made outside the form (a column added, a heading's filter, group): the form shows it too.
function put(k, v) {
  if (v)
    state.set(k, v);
  else
    state.delete(k);
  if (form.elements[k]) form.elements[k].value = v || '';
}
// KEY OP VALUE as the server reads it: the leftmost operator, the longest at one place.
function condition(text) {
  let at = -1, op = '';
  for (const o of ['<=', '>=', '!=', '=', '<', '>', '~']) {
    const i = text.indexOf(o);
    if (i > 0 && (at < 0 || i < at || (i === at && o.length > op.length))) at = i, op = o;
  }
  return at < 0 ? null : {key: text.slice(0, at).trim(), op, value: text.slice(at + op.length).trim()};
}
// A column's filter: `typed` ("16", "<0.2", "~learn"; "" drops it) replaces the filters on `key`.
function filterColumn(key, typed) {
  typed = typed.trim();
  const kept = multi('where').filter(w => (condition(w) || {}).key !== key);
  if (typed) kept.push(key + (/^(<=|>=|!=|=|<|>|~)/.test(typed) ? '' : '=') + typed);
  put('where', kept.join(';'));
  state.delete('page');
  go();
}
// What a column's filter box shows: the filter on its key, "=" left out.
function columnFilter(key) {
  const c = multi('where').map(condition).find(c => c && c.key === key);
  return c ? (c.op === '=' ? '' : c.op) + c.value : '';
}
document.getElementById('add-column-form').addEventListener('submit', e => {
  e.preventDefault();
  const key = e.target.elements.key.value.trim();
  if (key && !multi('column').includes(key)) put('column', [...multi('column'), key].join(';'));
  e.target.elements.key.value = '';
  go();
});
for (const k of ['where', 'column', 'status', 'size', 'group'])
  if (state.get(k)) form.elements[k].value = state.get(k);
form.addEventListener('submit', e => {
  e.preventDefault();
  for (const k of ['experiment', 'status', 'where', 'column', 'size', 'group']) {
    const v = form.elements[k].value.trim();
    if (v)
      state.set(k, v);
    else
      state.delete(k);
  }
  state.delete('page');
  go();
});
const address = () => '?' + state.toString().replace(/%2F/g, '/').replace(/%3B/g, ';').replace(/%2C/g, ',');
function go() {
  history.replaceState(null, '', address());
  load();
}
// notes.js's "show archived" (detail: the flag) and its archive buttons (no detail): the server leaves
// archived runs out of the table, its groups and its chart unless archived=1.
document.addEventListener('runs-archived', e => {
  if (e.detail !== undefined) {
    put('archived', e.detail ? '1' : '');
    state.delete('page');
  }
  go();
});
const page = () => Number(state.get('page') || 0);
document.getElementById('prev').onclick = () => {
  state.set('page', Math.max(0, page() - 1));
  go();
};
document.getElementById('next').onclick = () => {
  state.set('page', page() + 1);
  go();
};
let timer = null, loads = 0;
// The runs ticked for comparison, from any page or study: kept in the address (?sel=3,7,12).
const selected = new Set((state.get('sel') || '').split(',').map(Number).filter(n => Number.isInteger(n) && n > 0));
function showSelection() {
  const ids = [...selected].sort((a, b) => a - b), link = document.getElementById('compare-link');
  if (ids.length)
    state.set('sel', ids.join(','));
  else
    state.delete('sel');
  history.replaceState(null, '', address());
  document.getElementById('selected').textContent =
      ids.length ? `${ids.length} run(s) ticked: ${ids.join(', ')}` : 'Tick runs (any studies) to compare them.';
  link.hidden = document.getElementById('clear-selection').hidden = !ids.length;
  link.href = '/compare?runs=' + ids.join(',');
  link.textContent = `compare ${ids.length} run(s)`;
  document.body.dataset.selected = ids.length;
}
document.getElementById('clear-selection').onclick = () => {
  selected.clear();
  for (const box of document.querySelectorAll('input.pick')) box.checked = false;
  showSelection();
};
const pick = id => {
  const box = el('input', {type: 'checkbox', class: 'pick', 'aria-label': 'compare run ' + id});
  box.checked = selected.has(id);
  box.addEventListener('change', () => {
    if (box.checked)
      selected.add(id);
    else
      selected.delete(id);
    showSelection();
  });
  return box;
};
// Values in order: numbers by value (8 < 16 < 128), before text.
const natural = (a, b) => {
  const x = Number(a), y = Number(b), nx = a !== '' && !isNaN(x), ny = b !== '' && !isNaN(y);
  return nx && ny ? x - y : nx !== ny ? (nx ? -1 : 1) : String(a).localeCompare(String(b));
};
// A typed setting value (/api/runs: a number, true, a string) as a filter's VALUE and as shown.
const plain = v => v === null || v === undefined ? '' : typeof v === 'string' ? v : String(v);
// Groups (?group=KEY): each value's n and, per metric column, mean ± sd (n); the best mean of a
// column in bold (lower for losses and errors, higher for accuracies and F1).
function showGroups(D) {
  const box = document.getElementById('groups');
  if (!D.groups) return box.replaceChildren();
  const best = {};
  for (const c of D.columns) {
    const means = D.groups.filter(g => g.stats[c]).map(g => g.stats[c][1]);
    if (means.length) best[c] = higherIsBetter(c) ? Math.max(...means) : Math.min(...means);
  }
  D.groups.sort((a, b) => natural(setting(a.value), setting(b.value)));
  const t =
      el('table', {id: 'group-table'},
         el('tr', {}, el('th', {}, D.group), el('th', {}, 'runs'),
            ...D.columns.map(c => el('th', {}, `${c} mean ± sd (n)`))));
  for (const g of D.groups)
    t.append(
        el('tr', {'data-group': g.value}, el('td', {}, setting(g.value)), el('td', {class: 'num'}, g.n),
           ...D.columns.map(c => {
             const s = g.stats[c];
             if (!s) return el('td', {class: 'num'}, '');
             return el(
                 'td', {
                   class: 'num' + (s[1] === best[c] && D.groups.length > 1 ? ' best' : ''),
                   'data-metric': c,
                   'data-mean': s[1],
                   'data-n': s[0]
                 },
                 `${fmt(s[1], 4)} ± ${s[2] === null ? '–' : fmt(s[2], 2)} (${s[0]})`);
           })));
  box.replaceChildren(el('h2', {}, `Grouped by ${D.group}: every run the filters select`), t);
}
// The studies in the file, each with its page and its sweep.
function showStudies(experiments) {
  const studies = el(
      'table', {id: 'study-list'},
      el('tr', {}, el('th', {}, 'experiment'), el('th', {}, 'runs'), el('th', {}, 'training now'), el('th', {}, '')));
  for (const [name, runs, running] of experiments) {
    const q = encodeURIComponent(name);
    studies.append(el(
        'tr', {'data-study': name}, el('td', {}, el('a', {href: '/study/' + q}, name)), el('td', {class: 'num'}, runs),
        el('td', {class: 'num'}, running), el('td', {}, el('a', {href: '/sweep/' + q}, 'sweep'))));
  }
  keepFocus(() => document.getElementById('studies').replaceChildren(studies));
}
// ---- The chart (?chart-x=KEY&chart-y=METRIC&chart-colour=KEY&chart-log=x,y): a point per run the filters
// select, x a final metric or a setting (text settings as evenly spaced levels), y a final metric, the
// colour a setting's value; a click on a point opens its run. Chart.js is loaded when a chart is drawn.
const chartForm = document.getElementById('chart-form');
let chart = null, lastData = null;
const chartJs = () => window.Chart ? Promise.resolve() : new Promise((resolve, reject) => {
  const script = el('script', {src: '/static/chart.js'});
  script.onload = resolve;
  script.onerror = () => reject(new Error('Chart.js did not load from /static/chart.js'));
  document.head.append(script);
});
document.getElementById('chart-panel').open = !!state.get('chart-x');
chartForm.addEventListener('change', e => {
  const logs = ['x', 'y'].filter(a => chartForm.elements['log' + a].checked).join(',');
  put('chart-log', logs);
  if (e.target.type === 'checkbox') {  // the same points on other axes: no request
    history.replaceState(null, '', address());
    if (lastData) drawChart(lastData);
    return;
  }
  for (const [k, name] of [['chart-x', 'x'], ['chart-y', 'y'], ['chart-colour', 'colour']])
    put(k, chartForm.elements[name].value);
  go();
});
// The menus: x a final metric or a setting, y a final metric, the colour a setting (or none).
function chartMenus(D) {
  const options = keys => keys.map(k => el('option', {value: k}, k));
  const metrics = () => el('optgroup', {label: 'final metrics'}, ...options(D.metrics));
  const settings = () => el('optgroup', {label: 'settings'}, ...options(['variant', 'experiment', ...D.settings]));
  const menus = {x: [metrics(), settings()], y: [metrics()], colour: [settings()]};
  for (const [name, k] of [['x', 'chart-x'], ['y', 'chart-y'], ['colour', 'chart-colour']]) {
    const menu = chartForm.elements[name], want = state.get(k) || '';
    menu.replaceChildren(el('option', {value: ''}, name === 'colour' ? '(none)' : '(choose)'), ...menus[name]);
    if (want && ![...menu.options].some(o => o.value === want)) menu.append(el('option', {value: want}, want));
    menu.value = want;
  }
  const logs = (state.get('chart-log') || '').split(',');
  chartForm.elements.logx.checked = logs.includes('x');
  chartForm.elements.logy.checked = logs.includes('y');
}
async function drawChart(D) {
  lastData = D;
  const note = document.getElementById('chart-note');
  keepFocus(() => chartMenus(D));
  if (!D.chart) {
    if (chart) chart.destroy();
    chart = null;
    note.textContent = 'Choose x and y: a point per run the filters select.';
    return;
  }
  await chartJs();
  const [kx, ky, kc] = D.chart.keys, logs = (state.get('chart-log') || '').split(',');
  const has = D.chart.runs.filter(r => r[1] !== null && r[2] !== null);
  const numeric = has.every(r => typeof r[1] === 'number');
  const levels = numeric ? [] : [...new Set(has.map(r => plain(r[1])))].sort(natural);
  const logX = numeric && logs.includes('x'), logY = logs.includes('y');
  const drawn = has.filter(r => (!logX || r[1] > 0) && (!logY || r[2] > 0));
  // Points at one text level spread a little sideways, by run id, so that they do not hide each other.
  const x = r => numeric ? r[1] : levels.indexOf(plain(r[1])) + ((r[0] * 0.6180339) % 1 - 0.5) * 0.3;
  const colourOf = r => kc ? (r[3] === null ? '(unset)' : plain(r[3])) : 'runs';
  const values = [...new Set(drawn.map(colourOf))].sort(natural);
  const SHAPES = ['circle', 'triangle', 'rect', 'rectRot', 'star'];
  const datasets =
      values.map((v, i) => ({
                   label: v,
                   data: drawn.filter(r => colourOf(r) === v).map(r => ({x: x(r), y: r[2], run: r[0], raw: r})),
                   backgroundColor: alpha(COLORS[i % COLORS.length], 0.75),
                   borderColor: COLORS[i % COLORS.length],
                   pointStyle: SHAPES[Math.floor(i / COLORS.length) % SHAPES.length],
                   pointRadius: 4,
                   pointHoverRadius: 6,
                   clip: false  // a point at the end of an axis drawn whole
                 }));
  const axis = (key, log) => yAxis({type: log ? 'logarithmic' : 'linear', title: {display: true, text: key}});
  const xScale = numeric ? axis(kx, logX) : {
    type: 'linear',
    min: -0.5,
    max: levels.length - 0.5,
    title: {display: true, text: kx},
    afterBuildTicks: a => {
      a.ticks = levels.map((_, i) => ({value: i}));
    },
    ticks: {callback: v => levels[v] ?? ''}
  };
  if (chart) chart.destroy();
  const canvas = document.getElementById('chart');
  canvas.setAttribute('role', 'img');
  canvas.setAttribute('aria-label', `${ky} against ${kx}, a point per run` + (kc ? `, coloured by ${kc}` : ''));
  chart = new Chart(canvas, {
    type: 'scatter',
    data: {datasets},
    options: {
      animation: false,
      maintainAspectRatio: false,
      scales: {x: xScale, y: axis(ky, logY)},
      plugins: {
        legend: {display: !!kc, title: {display: !!kc, text: kc}, labels: {boxWidth: 10}},
        tooltip: {
          callbacks: {
            label: c => `run ${c.raw.run}: ${kx} ${plain(c.raw.raw[1])}, ${ky} ${fmt(c.raw.y)}` +
                (kc ? `, ${kc} ${colourOf(c.raw.raw)}` : '')
          }
        }
      },
      onClick: (e, points) => {
        if (points.length) location.href = '/run/' + datasets[points[0].datasetIndex].data[points[0].index].run;
      }
    }
  });
  const lacking = D.chart.runs.length - has.length, nonpositive = has.length - drawn.length;
  note.textContent = `${plural(drawn.length, 'run')} drawn` +
      (lacking ? `; ${plural(lacking, 'run')} without ${kx} or ${ky} left out` : '') +
      (nonpositive ? `; ${plural(nonpositive, 'run')} at or below 0 left off the log axis` : '') +
      (numeric || !logs.includes('x') ? '' : `; ${kx} is text: its axis is not logarithmic`) +
      (D.chart.runs.length >= 20000 ? '; only the first 20,000 runs (by id)' : '') + '. Click a point to open its run.';
  document.body.dataset.chartPoints = drawn.length;
}
async function load() {
  clearTimeout(timer);
  let D;
  try {
    D = await get(url());
  } catch (e) {
    document.getElementById('summary').replaceChildren(el('span', {class: 'bad', id: 'bad-filter'}, e.message));
    document.getElementById('table').replaceChildren();
    document.getElementById('groups').replaceChildren();
    document.getElementById('pageinfo').textContent = '';
    document.getElementById('prev').disabled = document.getElementById('next').disabled = true;
    if (chart) chart.destroy();
    chart = null;
    try {  // the studies are listed whatever the filter said, and the chart's menus offer what there is
      const all = await get('/api/runs?size=1');
      showStudies(all.experiments);
      chartMenus(all);
    } catch (_) {
    }
    document.body.dataset.ready = 'yes';
    return;
  }
  // The form shows the address's choices once, as the page opens: a reload while runs train leaves
  // alone what is chosen there and not yet shown (a study that started meanwhile joins the menu).
  const select = form.elements.experiment, opening = select.options.length === 1;
  const offered = new Set([...select.options].map(o => o.value));
  for (const [name] of D.experiments)
    if (!offered.has(name)) select.append(el('option', {}, name));
  if (opening) select.value = state.get('experiment') || '';
  document.getElementById('keys').replaceChildren(
      ...['experiment', 'variant', 'seed', 'status', 'duration', 'tag.phase', ...D.metrics, ...D.settings].map(
          k => el('option', {value: k})));
  document.getElementById('metrics').replaceChildren(
      ...[...D.metrics, ...D.settings].map(k => el('option', {value: k})));
  document.getElementById('setting-keys').replaceChildren(...D.settings.map(k => el('option', {value: k})));
  document.getElementById('group-keys')
      .replaceChildren(
          ...['variant', 'experiment', 'status', 'seed', ...D.settings].map(k => el('option', {value: k})));
  showGroups(D);
  const first = D.page * D.size;
  document.getElementById('summary').textContent = D.total ?
      `${plural(D.total, 'run')} ${D.total === 1 ? 'matches' : 'match'}; ${first + 1} to ${
          first + D.runs.length} shown` :
      'No run matches.';
  document.getElementById('pageinfo').textContent = `page ${D.page + 1} of ${Math.max(1, Math.ceil(D.total / D.size))}`;
  document.getElementById('prev').disabled = D.page === 0;
  document.getElementById('next').disabled = first + D.runs.length >= D.total;
  const sort = state.get('sort') || 'id', asc = state.get('order') === 'asc';
  // A heading: a button that sorts by its key (Tab to it, Enter or Space), aria-sort on the heading.
  const head = (label, key, ...extra) => {
    const button =
        el('button', {type: 'button', class: 'sort-button', id: 'sort-' + key},
           label + (sort === key ? (asc ? ' ▲' : ' ▼') : ''));
    button.onclick = () => {
      state.set('order', sort === key && !asc ? 'asc' : 'desc');
      state.set('sort', key);
      go();
    };
    const order = sort !== key ? 'none' : asc ? 'ascending' : 'descending';
    return el('th', {class: 'sort', 'data-sort': key, 'aria-sort': order}, button, ...extra);
  };
  // Under each heading one can filter by, a box: its filter as typed ("16", "<0.2"), Enter to apply.
  // A setting's heading also has a button that groups the table by it and one that drops the column.
  const editing = {};  // a box being typed into keeps its text through a reload
  for (const box of document.querySelectorAll('input.col-filter'))
    if (box.value !== box.defaultValue) editing[box.dataset.key] = box.value;
  const filterBox = key => {
    const box = el('input', {
      type: 'text',
      class: 'col-filter',
      id: 'filter-' + key,
      'data-key': key,
      value: columnFilter(key),
      'aria-label': `filter ${key} (16, <0.2, ~text)`
    });
    if (editing[key] !== undefined) box.value = editing[key];
    box.addEventListener('keydown', e => {
      if (e.key === 'Enter') filterColumn(key, box.value);
    });
    return el('td', {}, box);
  };
  const settingHead = key => {
    const grouped = state.get('group') === key;
    const group =
        el('button', {
          type: 'button',
          class: 'small',
          id: 'group-' + key,
          'aria-pressed': grouped,
          'aria-label': 'group the runs by ' + key
        },
           'group');
    group.onclick = () => {
      put('group', grouped ? '' : key);
      go();
    };
    const drop = el('button', {type: 'button', class: 'small', 'aria-label': 'remove column ' + key}, '×');
    drop.onclick = () => {
      put('column', multi('column').filter(c => c !== key).join(';'));
      go();
    };
    return head(key, key, el('span', {class: 'col-tools'}, group, ' ', drop));
  };
  const settings = D.setting_columns;
  const t = el(
      'table', {id: 'runs'},
      el('tr', {}, el('th', {}, ''), head('run', 'id'), head('experiment', 'experiment'), head('variant', 'variant'),
         head('seed', 'seed'), head('status', 'status'), head('started (UTC)', 'started'), head('duration', 'duration'),
         ...settings.map(settingHead), ...D.columns.map(c => head(c, c)), el('th', {}, 'tags'), el('th', {}, 'error')),
      el('tr', {class: 'filters'}, el('td', {}, ''), el('td', {}, ''), el('td', {}, ''), filterBox('variant'),
         filterBox('seed'), el('td', {}, ''), el('td', {}, ''), el('td', {}, ''), ...settings.map(k => filterBox(k)),
         ...D.columns.map(filterBox), el('td', {}, ''), el('td', {}, '')));
  // A click on a setting's value keeps only the runs with that value.
  const settingCell = (r, key) => {
    const v = r.settings[key],
          td =
              el('td', {class: typeof v === 'number' ? 'num value' : 'value', 'data-setting': key},
                 v === undefined ? '' : plain(v));
    if (v !== undefined) {
      td.title = `click: only the runs with ${key} = ${plain(v)}`;
      td.onclick = () => filterColumn(key, plain(v));
    }
    return td;
  };
  for (const r of D.runs) {
    const study = encodeURIComponent(r.experiment);
    t.append(
        el('tr', {'data-run': r.id, 'data-status': r.status}, el('td', {}, pick(r.id)),
           el('td', {}, el('a', {href: '/run/' + r.id}, String(r.id))),
           el('td', {}, el('a', {href: '/study/' + study}, r.experiment)), el('td', {}, r.variant),
           el('td', {class: 'num'}, r.seed ?? ''), el('td', {class: STATUS_CLASS[r.status] || ''}, r.status),
           el('td', {}, day(r.started)), el('td', {class: 'num'}, span(r.ended - r.started)),
           ...settings.map(k => settingCell(r, k)),
           ...D.columns.map(c => el('td', {class: 'num', 'data-metric': c}, fmt(r.final[c]))),
           el('td', {class: 'wrap'}, r.tags), el('td', {class: 'wrap bad'}, r.error.slice(0, 200))));
  }
  keepFocus(  // a box ticked (or a link) with the keyboard focus keeps it through the reload
      () => document.getElementById('table').replaceChildren(
          D.runs.length ? t : el('div', {class: 'nodata'}, 'No run matches these filters.')));
  drawChart(D);
  showStudies(D.experiments);
  document.body.dataset.rows = D.runs.length;
  document.body.dataset.total = D.total;
  document.body.dataset.loads = ++loads;
  showSelection();
  document.body.dataset.ready = 'yes';
  if (D.runs.some(r => r.status === 'running')) timer = setTimeout(load, 5000);  // live while runs train
}
load();
