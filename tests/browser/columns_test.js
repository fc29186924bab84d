// The runs table's setting columns and its chart, used as a researcher would (ctest browser.columns):
// puppeteer-core drives Debian's chromium against a live `htm serve` of a copy of the fixture study,
// with a 12-run grid study written into it by sqlite3 (model.dim 8/16/128, policy.plugin learned/random,
// train.lr 1e-4…0.1, a final test/mse and test/accuracy each). It adds setting columns by name, sorts a
// heading reached by Tab with Enter and Space (aria-sort, numbers in numeric order), filters from a
// column's box and from a click on a value, groups by a setting column (n and mean checked against the
// database), draws a chart (train.lr against test/mse, coloured by policy.plugin; a log axis with no
// request; a text setting as levels), reloads the address and finds the same view, and asks for a
// misspelt column (typed and in the address: one message naming the real one). The JSON is checked too:
// typed setting values, and 400 with {"error"} for a misspelt name. No page may report a script error.
//   usage: node columns_test.js HTM_BINARY FIXTURE_DATABASE   (screenshots: $HTM_BROWSER_SHOTS)
'use strict';
const {execFileSync} = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');
const {checker, startServe, launch, run} = require('./harness');

const [htm, fixture] = process.argv.slice(2, 4).map(f => path.resolve(f || ''));
const shots = process.env.HTM_BROWSER_SHOTS || '';
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'htm-columns-'));
const db = path.join(work, 'htm.sqlite');
const {check, verdict} = checker();
const sql = query => execFileSync('sqlite3', ['-readonly', '-csv', db, query])
                         .toString()
                         .trim()
                         .split('\n')
                         .map(line => line.split(','));

// Run i of the grid (0-11): model.dim by i % 3, policy.plugin by i % 2, train.lr by i / 3, test/mse 0.01 (i + 1).
const GRID = `INSERT INTO experiments (name, created_at) VALUES ('columns-grid', 0);
WITH RECURSIVE g(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM g WHERE i < 11)
INSERT INTO runs (uuid, experiment_id, variant, seed, status, started_at, ended_at)
  SELECT 'grid-' || i, (SELECT id FROM experiments WHERE name = 'columns-grid'), 'v' || (i % 3), i / 3, 'finished',
    1e9 + i, 1e9 + i + 60 FROM g;
CREATE TEMP VIEW grid AS SELECT id, CAST(substr(uuid, 6) AS INT) AS i FROM runs WHERE uuid LIKE 'grid-%';
INSERT INTO params (run_id, key, value) SELECT id, 'model.dim', CASE i % 3 WHEN 0 THEN '8' WHEN 1 THEN '16'
  ELSE '128' END FROM grid;
INSERT INTO params (run_id, key, value) SELECT id, 'policy.plugin', CASE i % 2 WHEN 0 THEN '"learned"'
  ELSE '"random"' END FROM grid;
INSERT INTO params (run_id, key, value) SELECT id, 'train.lr', CASE i / 3 WHEN 0 THEN '1e-04' WHEN 1 THEN '0.001'
  WHEN 2 THEN '0.01' ELSE '1e-01' END FROM grid;
INSERT INTO metrics (run_id, step, epoch, split, name, value, time) SELECT id, 100, 1, 'test', 'mse', 0.01 * (i + 1),
  1e9 FROM grid;
INSERT INTO metrics (run_id, step, epoch, split, name, value, time) SELECT id, 100, 1, 'test', 'accuracy',
  1 - 0.05 * i, 1e9 FROM grid;`;

async function serve() {
  fs.copyFileSync(fixture, db);
  execFileSync('sqlite3', [db, GRID]);
  return startServe(htm, db, [], work);
}

async function main() {
  const started = Date.now();
  const {server, base} = await serve();
  const browser = await launch();
  try {
    const page = await browser.newPage();
    await page.setViewport({width: 1400, height: 1000});
    const thrown = [], asked = [];
    page.on('pageerror', e => thrown.push(e.message));
    page.on('request', r => {
      if (r.url().includes('/api/runs')) asked.push(r.url());
    });
    const loads = () => page.evaluate(() => Number(document.body.dataset.loads || 0));
    const ready = async name => {
      await page.waitForFunction(() => document.body && document.body.dataset.ready === 'yes', {timeout: 15000});
      const errors = await page.$eval('#errors', e => e.textContent);
      check(!errors && !thrown.length, `${name}: no script error ${errors}${thrown.join('; ')}`);
    };
    // Does `act` and waits for the table's next load (data-loads counts them).
    const reloaded = async (name, act) => {
      const before = await loads();
      await act();
      await page.waitForFunction(n => Number(document.body.dataset.loads) > n, {timeout: 15000}, before);
      await ready(name);
    };
    const here = async () => new URLSearchParams(await page.evaluate(() => location.search));
    const column = key => page.$$eval(`#runs td[data-setting="${key}"]`, cells => cells.map(c => c.textContent));
    const shot = async name => {
      if (shots) await page.screenshot({path: path.join(shots, `serve-${name}.png`), fullPage: false});
    };
    if (shots) fs.mkdirSync(shots, {recursive: true});
    const grid = `/?experiment=columns-grid`;

    // ---- choose columns: typed into "add a setting column", Enter
    await page.goto(base + grid);
    await ready('runs');
    // ---- the JSON: setting columns typed, a misspelt one refused with the real name
    const api = await page.evaluate(async url => {
      const r = await fetch(url);
      return {status: r.status, body: await r.json()};
    }, base + '/api/runs?experiment=columns-grid&column=model.dim&column=policy.plugin&column=train.lr&size=1');
    const typed = api.body.runs && api.body.runs[0].settings;
    check(
        api.status === 200 && typeof typed['model.dim'] === 'number' && typed['policy.plugin'] === 'random' &&
            typed['train.lr'] === 0.1,
        `api: settings as typed JSON (${JSON.stringify(typed)})`);
    const bad = await page.evaluate(async url => {
      const r = await fetch(url);
      return {status: r.status, body: await r.json()};
    }, base + '/api/runs?column=modl.dim');
    check(
        bad.status === 400 && /did you mean 'model\.dim'\?$/.test(bad.body.error),
        `api: a misspelt column is 400 ${JSON.stringify(bad.body)}`);

    for (const key of ['model.dim', 'policy.plugin', 'train.lr'])
      await reloaded(`add column ${key}`, async () => {
        await page.type('#add-column', key);
        await page.keyboard.press('Enter');
      });
    check(
        (await here()).get('column') === 'model.dim;policy.plugin;train.lr',
        `columns kept in the URL (${(await here()).get('column')})`);
    const ids = await page.$$eval('#runs tr[data-run]', rows => rows.map(r => r.dataset.run));
    const want = Object.fromEntries(sql(`SELECT run_id, value FROM params WHERE key = 'model.dim'`));
    const dims = await column('model.dim');
    check(
        ids.length === 12 && dims.every((d, i) => d === want[ids[i]]),
        `model.dim column: the database's values (${dims.join(' ')})`);
    check(
        (await column('train.lr')).includes('0.0001') && (await column('policy.plugin')).includes('learned'),
        'train.lr 1e-04 shown as 0.0001, "learned" without its quotes');

    // ---- sort by keyboard: Tab to the model.dim heading, Enter (descending), Space (ascending)
    await page.focus('#add-column');
    let tabs = 0;
    while (tabs < 80 && await page.evaluate(() => document.activeElement.id) !== 'sort-model.dim') {
      await page.keyboard.press('Tab');
      tabs++;
    }
    check(tabs < 80, `the model.dim heading is reached by Tab (${tabs} presses)`);
    const sorted = async (key, how) => {
      const aria = await page.$eval(`th[data-sort="${key}"]`, th => th.getAttribute('aria-sort'));
      const v = (await column(key)).map(Number);
      const inOrder = v.every((x, i) => i === 0 || (how === 'ascending' ? v[i - 1] <= x : v[i - 1] >= x));
      const focused = await page.evaluate(() => document.activeElement.id);
      check(
          aria === how && inOrder && focused === 'sort-' + key,
          `sorted by ${key} ${how} with the keyboard: aria-sort ${aria}, ${v.join(' ')}, focus on ${focused}`);
    };
    await reloaded('sort Enter', () => page.keyboard.press('Enter'));
    await sorted('model.dim', 'descending');
    await reloaded('sort Space', () => page.keyboard.press('Space'));
    await sorted('model.dim', 'ascending');
    check((await here()).get('sort') === 'model.dim' && (await here()).get('order') === 'asc', 'sort kept in the URL');

    // ---- filter: the column's box, then a click on a value
    await reloaded('filter box', async () => {
      await page.type('#filter-model\\.dim', '16');
      await page.keyboard.press('Enter');
    });
    let dimsNow = await column('model.dim');
    check(
        dimsNow.length === 4 && dimsNow.every(d => d === '16') && (await here()).get('where') === 'model.dim=16',
        `filter box "16": ${dimsNow.length} runs, all model.dim 16, where=${(await here()).get('where')}`);
    await reloaded('filter box cleared', async () => {
      await page.click('#filter-model\\.dim', {clickCount: 3});
      await page.keyboard.press('Backspace');
      await page.keyboard.press('Enter');
    });
    check((await column('model.dim')).length === 12, 'filter box emptied: all 12 runs again');
    await reloaded('filter by click', () => page.click('#runs td[data-setting="policy.plugin"]:not(:empty)'));
    const plugins = await column('policy.plugin');
    check(
        plugins.length === 6 && new Set(plugins).size === 1 && /^policy\.plugin=/.test((await here()).get('where')),
        `a click on a policy.plugin value keeps its 6 runs (${(await here()).get('where')})`);
    await reloaded('filter box cleared again', async () => {
      await page.click('#filter-policy\\.plugin', {clickCount: 3});
      await page.keyboard.press('Backspace');
      await page.keyboard.press('Enter');
    });

    // ---- group by a setting column
    await reloaded('group', () => page.click('#group-model\\.dim'));
    const groups = await page.$$eval(
        '#group-table td[data-metric="test/mse"]',
        cells => cells.map(c => [c.parentNode.firstChild.textContent, Number(c.dataset.mean), Number(c.dataset.n)]));
    const means = {};
    for (const [dim, mse] of sql(`SELECT p.value, m.value FROM params p JOIN metrics m ON m.run_id = p.run_id
        AND m.split = 'test' AND m.name = 'mse' JOIN runs r ON r.id = p.run_id WHERE p.key = 'model.dim'
        AND r.uuid LIKE 'grid-%'`))
      (means[dim] = means[dim] || []).push(Number(mse));
    check(
        groups.map(g => g[0]).join(' ') === '8 16 128' &&
            groups.every(
                ([v, mean, n]) =>
                    n === means[v].length && Math.abs(mean - means[v].reduce((a, b) => a + b) / n) < 1e-9),
        `grouped by model.dim: ${JSON.stringify(groups)} (in numeric order, n and mean from the database)`);
    check(
        (await here()).get('group') === 'model.dim' &&
            await page.$eval('#group-model\\.dim', b => b.getAttribute('aria-pressed')) === 'true',
        'group kept in the URL, its button pressed');

    // ---- the chart: train.lr against test/mse, coloured by policy.plugin; then a log x axis
    await page.click('#chart-panel summary');
    const choose = async (name, value) =>
        reloaded(`chart ${name}`, () => page.select(`#chart-form [name=${name}]`, value));
    await choose('x', 'train.lr');
    await choose('y', 'test/mse');
    await choose('colour', 'policy.plugin');
    await page.waitForFunction(() => Number(document.body.dataset.chartPoints) === 12, {timeout: 15000});
    const drawn = () => page.evaluate(() => {
      const c = Chart.getChart('chart');
      return {
        x: c.scales.x.type,
        y: c.scales.y.type,
        sets: c.data.datasets.map(d => [d.label, d.data.length]),
        points: c.data.datasets.flatMap(d => d.data.map(p => [p.run, p.x, p.y]))
      };
    });
    let view = await drawn();
    const truth = Object.fromEntries(sql(`SELECT r.id, p.value, m.value FROM runs r JOIN params p ON p.run_id = r.id
        AND p.key = 'train.lr' JOIN metrics m ON m.run_id = r.id AND m.split = 'test' AND m.name = 'mse'
        WHERE r.uuid LIKE 'grid-%'`).map(([id, lr, mse]) => [id, [Number(lr), Number(mse)]]));
    check(
        view.x === 'linear' && JSON.stringify(view.sets) === '[["learned",6],["random",6]]' &&
            view.points.every(([id, x, y]) => truth[id] && truth[id][0] === x && Math.abs(truth[id][1] - y) < 1e-9),
        `chart: 12 points at each run's train.lr and final test/mse, two colours (${JSON.stringify(view.sets)})`);
    const before = asked.length;
    await page.click('#chart-form [name=logx]');
    await page.waitForFunction(() => Chart.getChart('chart').scales.x.type === 'logarithmic', {timeout: 5000});
    check(
        asked.length === before && (await here()).get('chart-log') === 'x',
        'log x: redrawn without a request, in the URL');
    await shot('columns-chart');

    // ---- the address holds the whole view: reload it
    const address = await page.evaluate(() => location.href);
    await page.goto(address);
    await ready('reloaded');
    await page.waitForFunction(() => Number(document.body.dataset.chartPoints) === 12, {timeout: 15000});
    view = await drawn();
    const heads = await page.$$eval('#runs th[data-sort]', ths => ths.map(t => t.dataset.sort));
    check(
        ['model.dim', 'policy.plugin', 'train.lr'].every(k => heads.includes(k)) &&
            await page.$eval('th[data-sort="model.dim"]', th => th.getAttribute('aria-sort')) === 'ascending' &&
            (await page.$$('#group-table tr[data-group]')).length === 3 && view.x === 'logarithmic' &&
            view.sets.length === 2 && await page.$eval('#chart-form [name=x]', s => s.value) === 'train.lr',
        `reloaded ${address.slice(base.length)}: the same columns, sort, groups and chart`);

    // ---- a text setting on x: its values as levels
    await choose('x', 'policy.plugin');
    await page.waitForFunction(() => Chart.getChart('chart').scales.x.type === 'linear', {timeout: 5000});
    const ticks = await page.evaluate(() => Chart.getChart('chart').scales.x.ticks.map(t => t.label));
    check(JSON.stringify(ticks) === '["learned","random"]', `policy.plugin on x: levels ${JSON.stringify(ticks)}`);

    // ---- misspelt names: typed into "add a setting column", and in the address
    await page.goto(base + grid);
    await ready('runs again');
    await page.type('#add-column', 'polcy.plugin');
    await page.keyboard.press('Enter');
    await page.waitForSelector('#bad-filter', {timeout: 15000});
    const said = await page.$eval('#bad-filter', e => e.textContent).catch(() => '');
    check(
        said === `column 'polcy.plugin': no run has a setting 'polcy.plugin'; did you mean 'policy.plugin'?`,
        `a misspelt column: "${said}"`);
    await page.goto(base + grid + '&chart-x=train.lr&chart-y=test%2Fmes');
    await ready('misspelt chart');
    const chartSaid = await page.$eval('#bad-filter', e => e.textContent).catch(() => '');
    check(/chart 'test\/mes'.*did you mean 'test\/mse'\?$/.test(chartSaid), `a misspelt chart metric: "${chartSaid}"`);

    // ---- the picture in docs/serve.md: three setting columns and a metric, grouped by one of them
    await page.goto(
        base + grid + '&column=policy.plugin;model.dim;train.lr;test/mse&sort=test/mse&order=asc' +
        '&group=policy.plugin');
    await ready('shown');
    await shot('columns');

    // ---- no wider than the window
    await page.goto(
        base + grid + '&column=model.dim;policy.plugin;train.lr;test/mse;test/accuracy' +
        '&chart-x=model.dim&chart-y=test/accuracy');
    await ready('wide');
    const width = await page.evaluate(() => document.documentElement.scrollWidth);
    check(width <= 1400, `runs page with five columns and a chart: ${width} px wide at 1400`);
  } finally {
    await browser.close();
    server.kill();
    fs.rmSync(work, {recursive: true, force: true});
  }
  verdict('columns', started);
}
run(main);
