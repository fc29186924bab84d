// What a reader adds to runs, on htm serve's run and runs pages (served as /static/notes.js; the
// routes are web/serve_write.cpp's). On a run's page (#notes): its note, its user tags (the run's
// own tags beside them, read only) and its archived flag. On the runs table (#notes-bar): archive
// or unarchive the ticked runs, archived runs left out (by the server) until "show archived" is ticked, and saved
// views (the page's address under a name). A server started without --allow-writes shows them
// read only. The writes are JSON POSTs; the page's token is its same-site cookie, and the server
// checks the request's Origin. A refused write is said beside its button, not in #errors.
'use strict';
(() => {
  const box = (id, text = '', cls = 'muted') => el('span', {id, class: cls}, text);
  const say = (id, text, ok = true) => {
    const e = document.getElementById(id);
    e.textContent = text;
    e.className = ok ? 'muted' : 'bad';
  };
  async function post(url, body) {
    const response = await fetch(url, {
      method: 'POST',
      headers: {'Content-Type': 'application/json'},
      body: JSON.stringify(body),
      credentials: 'same-origin'
    });
    const answer = await response.json().catch(() => ({error: response.statusText}));
    if (!response.ok) throw new Error(answer.error || response.statusText);
    return answer;
  }
  const READ_ONLY = 'read only: htm serve --allow-writes --token T takes notes, tags, archive flags and views';
  const when = t => t ? new Date(t * 1000).toISOString().replace('T', ' ').slice(0, 16) + ' UTC' : '';

  // ---- a run's page
  function runPage(root, run) {
    const url = `/api/run/${run}`;
    const text = el('textarea', {id: 'note-text', rows: 4, cols: 80, 'aria-label': 'note', maxlength: 16384});
    const save = el('button', {id: 'note-save', type: 'button'}, 'save note');
    const key =
        el('input', {id: 'tag-key', type: 'text', placeholder: 'key', style: 'width: 9em', 'aria-label': 'tag key'});
    const value =
        el('input',
           {id: 'tag-value', type: 'text', placeholder: 'value', style: 'width: 14em', 'aria-label': 'tag value'});
    const add = el('button', {id: 'tag-add', type: 'button'}, 'add tag');
    const archived = el('input', {id: 'run-archived', type: 'checkbox'});
    const tags = el('span', {id: 'user-tags'}), own = el('span', {id: 'own-tags', class: 'muted'});
    root.replaceChildren(
        el('h2', {}, 'Notes ',
           el('span', {class: 'muted'}, '(yours: beside the results, never a metric or a setting)')),
        el('p', {}, text, el('br'), save, ' ', box('note-status')),
        el('p', {}, 'tags: ', tags, ' ', key, ' = ', value, ' ', add, ' ', box('tag-status')),
        el('p', {}, 'recorded by htm run (read only): ', own),
        el('p', {}, el('label', {}, archived, ' archived (hidden from the runs table until "show archived")'), ' ',
           box('archive-status')));
    let writes = false;
    const show = d => {
      writes = d.writes;
      writable(writes);
      if (document.activeElement !== text) text.value = d.note;
      say('note-status', d.note_at ? 'saved ' + when(d.note_at) : '');
      tags.replaceChildren(...Object.entries(d.tags).map(([k, v]) => {
        const drop = el('button', {type: 'button', class: 'tag-remove', 'aria-label': 'remove tag ' + k}, '×');
        drop.hidden = !writes;
        drop.onclick = () => write('tag-status', `${url}/tag`, {key: k, remove: true});
        return el('span', {class: 'user-tag', 'data-key': k}, `${k}=${v} `, drop, ' ');
      }));
      own.textContent = Object.entries(d.own_tags).map(([k, v]) => `${k}=${v}`).join(' ') || '(none)';
      archived.checked = d.archived;
      for (const e of [save, add, key, value, archived]) e.disabled = !writes;
      text.readOnly = !writes;
      if (!writes) say('note-status', READ_ONLY);
      document.body.dataset.notes = d.note;
      document.body.dataset.userTags = Object.entries(d.tags).map(([k, v]) => `${k}=${v}`).join(' ');
      document.body.dataset.archived = d.archived ? 'yes' : 'no';
      document.body.dataset.notesReady = 'yes';
    };
    async function write(status, to, body) {
      say(status, 'saving…');
      try {
        show(await post(to, body));
        say(status, 'saved');
      } catch (e) {
        say(status, e.message, false);
      }
    }
    save.onclick = () => write('note-status', `${url}/note`, {text: text.value});
    add.onclick = () => {
      write('tag-status', `${url}/tag`, {key: key.value.trim(), value: value.value.trim()});
      key.value = value.value = '';
    };
    archived.onchange = () => write('archive-status', `${url}/archive`, {archived: archived.checked});
    get(`${url}/notes`).then(show).catch(e => say('note-status', e.message, false));
  }

  // ---- the runs table
  function runsPage(root) {
    const params = () => new URLSearchParams(location.search);
    let writes = false, decorated = 0;
    const toggle = el('input', {id: 'show-archived', type: 'checkbox'});
    toggle.checked = params().get('archived') === '1';
    const archive = el('button', {id: 'archive-ticked', type: 'button'}, 'archive ticked');
    const unarchive = el('button', {id: 'unarchive-ticked', type: 'button'}, 'unarchive ticked');
    const menu = el('select', {id: 'views', 'aria-label': 'saved views'});
    const name =
        el('input',
           {id: 'view-name', type: 'text', placeholder: 'view name', style: 'width: 12em', 'aria-label': 'view name'});
    const save = el('button', {id: 'view-save', type: 'button'}, 'save view');
    const drop = el('button', {id: 'view-delete', type: 'button'}, 'delete view');
    root.replaceChildren(
        el('p', {}, archive, ' ', unarchive, ' ', el('label', {}, toggle, ' show archived ', box('archived-count')),
           ' ', box('archive-status'), el('br'), 'saved views: ', menu, ' ', name, ' ', save, ' ', drop, ' ',
           box('views-status')));
    // The address as a view keeps: everything but the token (and the page number).
    const state = () => {
      const q = params();
      q.delete('token');
      q.delete('page');
      return q.toString().replace(/%2C/g, ',');
    };
    const showViews = d => {
      writes = d.writes;
      writable(writes);
      menu.replaceChildren(
          el('option', {value: ''}, d.views.length ? '(open a saved view)' : '(none saved)'),
          ...d.views.map(v => el('option', {value: v.state, 'data-name': v.name}, v.name)));
      for (const e of [archive, unarchive, save, drop, name]) e.hidden = !writes;
      if (!writes) say('views-status', READ_ONLY);
      document.body.dataset.views = d.views.map(v => v.name).join('|');
    };
    menu.onchange = () => {
      if (menu.value !== '' || menu.selectedIndex > 0) location.href = '/?' + menu.value;
    };
    save.onclick = async () => {
      try {
        showViews(await post('/api/views', {name: name.value.trim(), state: state()}));
        say('views-status', `saved '${name.value.trim()}'`);
      } catch (e) {
        say('views-status', e.message, false);
      }
    };
    drop.onclick = async () => {
      const chosen = menu.selectedOptions[0], which = chosen && chosen.dataset.name || name.value.trim();
      try {
        showViews(await post('/api/views/delete', {name: which}));
        say('views-status', `deleted '${which}'`);
      } catch (e) {
        say('views-status', e.message, false);
      }
    };
    // Each table the runs page draws: its archived rows (there only with "show archived": the server
    // leaves them out otherwise) marked; a note as the run's title.
    async function decorate() {
      const rows = [...document.querySelectorAll('#table tr[data-run]')];
      const d = await get('/api/annotations?runs=' + rows.map(r => r.dataset.run).join(','));
      for (const row of rows) {
        const a = d.runs[row.dataset.run] || {archived: false, note: '', tags: {}};
        row.dataset.archived = a.archived ? 'yes' : 'no';
        row.style.opacity = a.archived ? '0.55' : '';
        const link = row.querySelector('a[href^="/run/"]');
        const tags = Object.entries(a.tags).map(([k, v]) => `${k}=${v}`).join(' ');
        if (link) link.title = [a.note, tags && 'tags: ' + tags, a.archived && '(archived)'].filter(s => s).join('\n');
      }
      say('archived-count', `(${d.archived_total} in the file)`);
      writes = d.writes;
      document.body.dataset.annotated = ++decorated;
    }
    const redo = () => decorate().catch(e => say('archive-status', e.message, false));
    new MutationObserver(redo).observe(document.getElementById('table'), {childList: true});
    // The server leaves archived runs out (runs.js asks with archived=1 when they are shown).
    const reload = detail => document.dispatchEvent(new CustomEvent('runs-archived', {detail}));
    toggle.onchange = () => reload(toggle.checked);
    const mark = async flag => {
      const ticked = (params().get('sel') || '').split(',').filter(s => /^\d+$/.test(s));
      if (!ticked.length) return say('archive-status', 'tick runs first', false);
      try {
        for (const id of ticked) await post(`/api/run/${id}/archive`, {archived: flag});
        say('archive-status', `${ticked.length} run(s) ${flag ? 'archived' : 'unarchived'}`);
      } catch (e) {
        say('archive-status', e.message, false);
      }
      reload();
    };
    archive.onclick = () => mark(true);
    unarchive.onclick = () => mark(false);
    get('/api/views').then(showViews).catch(e => say('views-status', e.message, false));
    if (document.querySelector('#table tr[data-run]')) redo();
  }

  // The navigation says "read only" (serve_pages.cpp): on a server that takes writes, say which.
  const writable = writes => {
    const nav = document.querySelector('nav .muted');
    if (writes && nav) nav.textContent = 'htm serve: read only but for notes, tags, archive flags and views';
  };
  const start = () => {
    const run = location.pathname.match(/^\/run\/(\d+)$/), notes = document.getElementById('notes');
    if (run && notes) runPage(notes, run[1]);
    const bar = document.getElementById('notes-bar');
    if (bar) runsPage(bar);
  };
  if (document.readyState === 'loading')
    document.addEventListener('DOMContentLoaded', start);
  else
    start();
})();
