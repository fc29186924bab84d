// Writing from the page (ctest browser.notes): puppeteer-core drives Debian's chromium against a
// live `htm serve --allow-writes --token T` of a copy of the two-variant, two-seed fixture study.
// On a run's page it writes a note and a tag and archives the run, and reads them back after a
// reload, in the database (sqlite3) and from `htm runs`; on the runs table the archived run is
// hidden until "show archived", another run is archived by its tick box and unarchived, and a view
// is saved and opened again from the menu. A page of another origin (a second port: the same site,
// so the cookie goes along) posts a note and a forged archive: nothing is written. No page may
// report a script error.
//   usage: node notes_test.js HTM_BINARY FIXTURE_DATABASE   (screenshots: $HTM_BROWSER_SHOTS)
'use strict';
const {execFileSync} = require('child_process');
const fs = require('fs');
const http = require('http');
const os = require('os');
const path = require('path');
const {checker, startServe, launch, run} = require('./harness');

const [htm, fixture] = process.argv.slice(2, 4).map(f => path.resolve(f || ''));
const shots = process.env.HTM_BROWSER_SHOTS || '';
if (shots) fs.mkdirSync(shots, {recursive: true});  // whichever browser test runs first makes it
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'htm-notes-'));
const db = path.join(work, 'htm.sqlite');
const TOKEN = 'notes-test-' + process.pid;
const {check, verdict} = checker();
const sql = query => execFileSync('sqlite3', ['-readonly', db, query]).toString().trim();

async function serve() {
  fs.copyFileSync(fixture, db);
  return startServe(htm, db, ['--allow-writes', '--token', TOKEN], work);
}

// A page of another origin (127.0.0.1 on another port) that tries to write to the server.
function evilSite(target, run) {
  const page = `<!doctype html><script>
    const to = '${target}/api/run/${run}';
    Promise.allSettled([
      fetch(to + '/note', {method: 'POST', credentials: 'include', headers: {'Content-Type': 'text/plain'},
                           body: JSON.stringify({text: 'forged'})}),
      fetch(to + '/archive', {method: 'POST', credentials: 'include', mode: 'no-cors',
                              headers: {'Content-Type': 'text/plain'}, body: JSON.stringify({archived: false})}),
      fetch(to + '/tag', {method: 'POST', credentials: 'include', headers: {'Content-Type': 'application/json'},
                          body: JSON.stringify({key: 'forged', value: 'x'})})
    ]).then(() => { document.title = 'done'; });
  </script>`;
  const server = http.createServer((req, res) => res.end(page));
  return new Promise(resolve => server.listen(0, '127.0.0.1', () => resolve(server)));
}

// A POST of a note from outside the browser with `headers`; its status.
const post = (url, headers) => new Promise((resolve, reject) => {
  const req = http.request(
      url, {method: 'POST', headers: {'Content-Type': 'application/json', ...headers}}, res => resolve(res.statusCode));
  req.on('error', reject);
  req.end(JSON.stringify({text: 'from a script'}));
});

async function main() {
  const started = Date.now();
  const {server, base} = await serve();
  const browser = await launch();
  const evil = [];
  try {
    const page = await browser.newPage();
    await page.setViewport({width: 1280, height: 900});
    const thrown = [];
    page.on('pageerror', e => thrown.push(e.message));
    const ready = async (name, flag = 'ready') => {
      await page.waitForFunction(f => document.body && document.body.dataset[f], {timeout: 15000}, flag);
      const errors = await page.$eval('#errors', e => e.textContent);
      check(!errors && !thrown.length, `${name}: no script error ${errors}${thrown.join('; ')}`);
    };
    const data = name => page.evaluate(n => document.body.dataset[n], name);
    const [run, other] = sql('SELECT id FROM runs ORDER BY id LIMIT 2').split('\n');

    // The token once in the address: the server keeps it in a same-site cookie for the page's writes.
    await page.goto(`${base}/?token=${TOKEN}`);
    await ready('runs page');
    await page.waitForFunction(() => Number(document.body.dataset.annotated) > 0, {timeout: 10000});

    // ---- a run's page: a note, a tag, archived
    await page.goto(`${base}/run/${run}`);
    await ready('run page');
    await ready('run page notes', 'notesReady');
    const NOTE = 'lr too high: the loss jumps at step 3\nretry with 3e-4 (ünïcode ✓)';
    await page.type('#note-text', NOTE);
    await page.click('#note-save');
    await page.waitForFunction(() => document.getElementById('note-status').textContent === 'saved', {timeout: 5000});
    await page.type('#tag-key', 'owner');
    await page.type('#tag-value', 'ana');
    await page.click('#tag-add');
    await page.waitForFunction(() => document.body.dataset.userTags === 'owner=ana', {timeout: 5000});
    await page.type('#tag-key', 'verdict');
    await page.type('#tag-value', 'unstable');
    await page.click('#tag-add');
    await page.waitForFunction(() => document.body.dataset.userTags.includes('verdict='), {timeout: 5000});
    await page.click('.user-tag[data-key="verdict"] .tag-remove');  // and take it away again
    await page.waitForFunction(() => document.body.dataset.userTags === 'owner=ana', {timeout: 5000});
    await page.click('#run-archived');
    await page.waitForFunction(() => document.body.dataset.archived === 'yes', {timeout: 5000});
    if (shots) {
      await page.evaluate(() => document.getElementById('notes').scrollIntoView());
      await page.screenshot({path: path.join(shots, 'serve-notes.png'), clip: {x: 0, y: 0, width: 1280, height: 520}});
    }
    await page.reload();
    await ready('run page again', 'notesReady');
    check(await page.$eval('#note-text', e => e.value) === NOTE, 'the note reads back after a reload');
    check(await data('userTags') === 'owner=ana', 'the tag reads back (the removed one is gone)');
    check(await data('archived') === 'yes', 'archived reads back');
    check(sql(`SELECT text FROM run_notes WHERE run_id = ${run}`) === NOTE, 'the note is in run_notes');
    check(sql('SELECT group_concat(key || \'=\' || value) FROM run_user_tags') === 'owner=ana', 'run_user_tags');
    check(sql(`SELECT count(*) FROM tags WHERE key IN ('owner', 'verdict')`) === '0', 'the run\'s own tags untouched');
    const runs = execFileSync(htm, ['runs', '--db', db]).toString();
    const all = execFileSync(htm, ['runs', '--db', db, '--archived']).toString();
    check(
        runs.includes('1 archived run(s) not shown') && !new RegExp(`^ *${run} +cli-variants`, 'm').test(runs),
        'htm runs leaves the archived run out');
    check(
        all.includes('lr too high: the loss jumps') && all.includes('owner=ana') && all.includes('archived'),
        'htm runs --archived shows its note, tag and flag');

    // ---- the runs table: the archived run hidden, shown on asking; archive a ticked run
    await page.goto(`${base}/`);
    await ready('runs table');
    await page.waitForFunction(() => Number(document.body.dataset.annotated) > 0, {timeout: 10000});
    const api = q => page.evaluate(async q => (await fetch('/api/runs?' + q)).json(), q);
    const [plain, everything] = [await api(''), await api('archived=1')];
    check(
        !(await page.$(`#table tr[data-run="${run}"]`)) && plain.total === everything.total - 1 &&
            !plain.runs.some(r => String(r.id) === run),
        `the server leaves the archived run out of the runs table and its count (${plain.total} of ${
            everything.total})`);
    await page.click('#show-archived');
    await page.waitForFunction(r => document.querySelector(`#table tr[data-run="${r}"]`), {timeout: 5000}, run);
    check(
        new URLSearchParams(await page.evaluate(() => location.search)).get('archived') === '1',
        '"show archived" shows it, in the address');
    // A tag given from the page is a tag like the run's own: filtered on, grouped by.
    const tagged = await api('archived=1&where=tag.owner%3Dana&group=tag.owner');
    check(
        tagged.total === 1 && String(tagged.runs[0].id) === run && tagged.runs[0].tags.includes('owner=ana') &&
            tagged.groups.some(g => g.value === 'ana' && g.n === 1),
        'tag.owner=ana (a user tag) filters and groups the runs table');
    await page.goto(`${base}/compare?runs=${run},${other}`);
    await ready('compare page');
    const owner = await page.$$eval(
        '#settings-table tr',
        rows => rows.map(r => [...r.children].map(c => c.textContent)).find(cells => cells[0] === 'tag.owner'));
    check(owner && owner[1] === 'ana' && owner[2] === '(unset)', `the compare page compares the user tag (${owner})`);
    await page.goto(`${base}/?archived=1`);
    await ready('runs table again');
    await page.waitForFunction(() => Number(document.body.dataset.annotated) > 0, {timeout: 10000});
    await page.click(`#table tr[data-run="${other}"] input.pick`);
    await page.click('#archive-ticked');
    await page.waitForFunction(
        () => /archived$/.test(document.getElementById('archive-status').textContent), {timeout: 5000});
    check(sql('SELECT count(*) FROM run_archived WHERE archived = 1') === '2', 'the ticked run is archived');
    await page.click('#unarchive-ticked');
    await page.waitForFunction(
        () => /unarchived$/.test(document.getElementById('archive-status').textContent), {timeout: 5000});
    check(sql(`SELECT archived FROM run_archived WHERE run_id = ${other}`) === '0', 'and unarchived');

    // ---- saved views: the address under a name, opened again from the menu
    const STATE = `experiment=cli-variants&sort=seed&order=asc&sel=${other}`;
    await page.goto(`${base}/?${STATE}`);
    await ready('runs table with a view');
    await page.waitForFunction(() => document.body.dataset.views !== undefined, {timeout: 5000});
    await page.type('#view-name', 'by seed');
    await page.click('#view-save');
    await page.waitForFunction(() => document.body.dataset.views === 'by seed', {timeout: 5000});
    check(sql('SELECT state FROM saved_views WHERE name = \'by seed\'') === STATE, 'the view keeps the address');
    await page.goto(`${base}/`);
    await ready('runs table, plain');
    await page.waitForFunction(() => document.body.dataset.views === 'by seed', {timeout: 5000});
    await Promise.all([page.waitForNavigation(), page.select('#views', STATE)]);
    await ready('the saved view opened');
    check(
        new URLSearchParams(await page.evaluate(() => location.search)).toString() === STATE,
        'opening the view restores its address');

    // ---- another origin writes nothing, though the browser sends the cookie (same site)
    const before = sql('SELECT text, updated_at FROM run_notes') + sql('SELECT * FROM run_archived');
    evil.push(await evilSite(base, run));
    const evilPage = await browser.newPage();
    await evilPage.goto(`http://127.0.0.1:${evil[0].address().port}/`);
    await evilPage.waitForFunction(() => document.title === 'done', {timeout: 10000});
    check(
        sql('SELECT text, updated_at FROM run_notes') + sql('SELECT * FROM run_archived') === before &&
            sql('SELECT count(*) FROM run_user_tags WHERE key = \'forged\'') === '0',
        'a page of another origin wrote nothing');
    const forged =
        await post(`${base}/api/run/${run}/note`, {'Cookie': `htm_token=${TOKEN}`, 'Origin': 'http://evil.example'});
    check(forged === 403, `a forged Origin with the cookie: 403 (got ${forged})`);
    check(await post(`${base}/api/run/${run}/note`, {}) === 403, 'no token: 403');
    check(await post(`${base}/api/run/${run}/note`, {'X-HTM-Token': TOKEN}) === 200, 'the token in a header: 200');
  } finally {
    await browser.close();
    server.kill();
    for (const s of evil) s.close();
  }
  fs.rmSync(work, {recursive: true, force: true});
  verdict('notes', started);
}
run(main);
