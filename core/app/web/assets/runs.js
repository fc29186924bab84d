'use strict';
const form = document.getElementById('filters');
const state = new URLSearchParams(location.search);
const multi = name => (state.get(name) || '').split(';').map(s => s.trim()).filter(s => s);
function url() {
  const q = new URLSearchParams();
  for (const k of ['experiment', 'status', 'size', 'page', 'sort', 'order', 'group'])
    if (state.get(k)) q.set(k, state.get(k));
  for (const w of multi('where')) q.append('where', w);
  for (const c of multi('column')) q.append('column', c);
  return '/api/runs?' + q;
}
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
function go() {
  history.replaceState(null, '', '?' + state);
  load();
}
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
  history.replaceState(null, '', '?' + state.toString().replace(/%2C/g, ','));
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
  const t =
      el('table', {id: 'group-table'},
         el('tr', {}, el('th', {}, D.group), el('th', {}, 'runs'),
            ...D.columns.map(c => el('th', {}, `${c} mean ± sd (n)`))));
  for (const g of D.groups)
    t.append(
        el('tr', {'data-group': g.value}, el('td', {}, g.value.replace(/^"(.*)"$/, '$1')),
           el('td', {class: 'num'}, g.n), ...D.columns.map(c => {
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
    try {  // the studies are listed whatever the filter said
      showStudies((await get('/api/runs?size=1')).experiments);
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
  document.getElementById('metrics').replaceChildren(...D.metrics.map(k => el('option', {value: k})));
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
  const head = (label, key) => {
    const th = el('th', {class: 'sort', 'data-sort': key}, label + (sort === key ? (asc ? ' ▲' : ' ▼') : ''));
    th.onclick = () => {
      state.set('order', sort === key && !asc ? 'asc' : 'desc');
      state.set('sort', key);
      go();
    };
    return th;
  };
  const t = el(
      'table', {id: 'runs'},
      el('tr', {}, el('th', {}, ''), head('run', 'id'), head('experiment', 'experiment'), head('variant', 'variant'),
         head('seed', 'seed'), head('status', 'status'), head('started (UTC)', 'started'), head('duration', 'duration'),
         ...D.columns.map(c => head(c, c)), el('th', {}, 'tags'), el('th', {}, 'error')));
  for (const r of D.runs) {
    const study = encodeURIComponent(r.experiment);
    t.append(
        el('tr', {'data-run': r.id, 'data-status': r.status}, el('td', {}, pick(r.id)),
           el('td', {}, el('a', {href: '/run/' + r.id}, String(r.id))),
           el('td', {}, el('a', {href: '/study/' + study}, r.experiment)), el('td', {}, r.variant),
           el('td', {class: 'num'}, r.seed ?? ''), el('td', {class: STATUS_CLASS[r.status] || ''}, r.status),
           el('td', {}, day(r.started)), el('td', {class: 'num'}, span(r.ended - r.started)),
           ...D.columns.map(c => el('td', {class: 'num', 'data-metric': c}, fmt(r.final[c]))),
           el('td', {class: 'wrap'}, r.tags), el('td', {class: 'wrap bad'}, r.error.slice(0, 200))));
  }
  keepFocus(  // a box ticked (or a link) with the keyboard focus keeps it through the reload
      () => document.getElementById('table').replaceChildren(
          D.runs.length ? t : el('div', {class: 'nodata'}, 'No run matches these filters.')));
  showStudies(D.experiments);
  document.body.dataset.rows = D.runs.length;
  document.body.dataset.total = D.total;
  document.body.dataset.loads = ++loads;
  showSelection();
  document.body.dataset.ready = 'yes';
  if (D.runs.some(r => r.status === 'running')) timer = setTimeout(load, 5000);  // live while runs train
}
load();
