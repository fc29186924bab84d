// Pictures in htm serve (ctest browser.pictures): puppeteer-core drives Debian's chromium through a live
// `htm serve` of a copy of the fixture study (pictures at step 2) and one more run that draws them at each
// epoch's end (steps 2, 4 and 6). On the compare page of two fixture runs and that run: a row a kind, the
// runs side by side at one step; the step slider moves every run (each to its nearest step); a click
// enlarges a heatmap past its size in the page, Escape closes it and gives the focus back; Enter on a
// picture (reached by the keyboard) opens it and a click closes it; the reconstructions' rows are named
// (input, reconstruction) at their middles; the kinds come in the same order (by name) on the compare,
// run and study pages of both studies; the page is no wider than 1400 px. No script error on any page.
//   usage: node pictures_test.js HTM_BINARY FIXTURE_DATABASE TINY_TOML   (screenshots: $HTM_BROWSER_SHOTS)
'use strict';
const {execFileSync} = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');
const {checker, startServe, launch, run} = require('./harness');

const [htm, fixture, tiny] = process.argv.slice(2, 5).map(f => path.resolve(f || ''));
const shots = process.env.HTM_BROWSER_SHOTS || '';
if (shots) fs.mkdirSync(shots, {recursive: true});  // whichever browser test runs first makes it
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'htm-pictures-'));
const db = path.join(work, 'htm.sqlite');
const {check, verdict} = checker();
const sql = query => execFileSync('sqlite3', ['-readonly', '-csv', db, query]).toString().trim().split('\n');

async function serve() {
  fs.copyFileSync(fixture, db);
  // Three epochs of two steps, pictures at each epoch's end: steps 2, 4 and 6.
  execFileSync(htm, [
    'run', tiny, '--quiet', '--db', db, '--set', 'experiment.name="pictures-steps"', '--set', 'train.epochs=3', '--set',
    'runtime.pictures_every=1', '--set', `runtime.artifacts="${path.join(work, 'runs')}"`
  ]);
  return startServe(htm, db, [], work);
}

async function main() {
  const started = Date.now();
  const {server, base} = await serve();
  const browser = await launch();
  try {
    const page = await browser.newPage();
    await page.setViewport({width: 1400, height: 1000});
    const thrown = [];
    page.on('pageerror', e => thrown.push(e.message));
    const open = async (name, url) => {
      await page.goto(base + url);
      await page.waitForFunction(() => document.body.dataset.ready === 'yes', {timeout: 20000});
      const errors = await page.$eval('#errors', e => e.textContent);
      check(!errors && !thrown.length, `${name}: no script error ${errors}${thrown.join('; ')}`);
    };
    const stepped = sql(`SELECT r.id FROM runs r JOIN experiments e ON e.id = r.experiment_id
        WHERE e.name = 'pictures-steps'`)[0];
    const fixtureRuns = sql(`SELECT r.id FROM runs r JOIN experiments e ON e.id = r.experiment_id
        WHERE e.name = 'cli-variants' AND EXISTS (SELECT 1 FROM artifacts a WHERE a.run_id = r.id
        AND a.path LIKE '%.png') ORDER BY r.id LIMIT 2`);
    const kinds = sql(`SELECT DISTINCT kind FROM artifacts WHERE path LIKE '%.png' ORDER BY kind`);
    const ids = fixtureRuns.concat([stepped]);

    // ---- the compare page: a row a kind, a column a run, every run at one step
    await open('compare', `/compare?runs=${ids.join(',')}`);
    const grid = () => page.evaluate(() => {
      const heads = [...document.querySelectorAll('.picture-head')].map(h => [h.dataset.run, h.dataset.step]);
      const rows = [...document.querySelectorAll('.picture-kind')].map(h => {
        const cells = [];
        for (let c = h.nextElementSibling; c && !c.classList.contains('picture-kind'); c = c.nextElementSibling)
          cells.push([c.dataset.run, c.dataset.step ?? null, c.tagName]);
        return {kind: h.textContent, cells};
      });
      return {heads, rows};
    });
    let g = await grid();
    check(
        JSON.stringify(g.rows.map(r => r.kind)) === JSON.stringify(kinds) &&
            g.rows.every(r => JSON.stringify(r.cells.map(c => c[0])) === JSON.stringify(ids)),
        `compare: a row per kind (${g.rows.map(r => r.kind)}, by name), the runs ${ids} side by side in each`);
    const steps = await page.$eval('#picture-step', s => [Number(s.min), Number(s.max), Number(s.value)]);
    const moveTo = async index => {
      await page.$eval('#picture-step', (s, i) => {
        s.value = i;
        s.dispatchEvent(new Event('input'));
      }, index);
      return grid();
    };
    g = await moveTo(0);  // step 2: every run has pictures there
    const figures = r => r.cells.filter(c => c[2] === 'FIGURE');
    check(
        g.heads.every(h => h[1] === '2') &&
            g.rows.every(r => figures(r).length === 3 && r.cells.every(c => c[1] === '2')),
        `compare: slider at step 2, every run's pictures at step 2 (${g.heads.map(h => h.join('@'))})`);
    await page.$eval('#pictures', p => p.scrollIntoView());
    await page.waitForFunction(() => [...document.querySelectorAll('#pictures img')].every(i => i.naturalWidth > 0));
    if (shots) await page.screenshot({path: path.join(shots, 'serve-compare-pictures.png')});
    g = await moveTo(steps[1]);  // step 6: the fixture's runs have only step 2, the nearest
    const want = ids.map(id => id === stepped ? '6' : '2');
    check(
        steps[1] === 2 && JSON.stringify(g.heads.map(h => h[1])) === JSON.stringify(want) &&
            g.rows.every(r => JSON.stringify(r.cells.map(c => c[1])) === JSON.stringify(want)),
        `compare: slider at step 6 moves every run, each to its nearest step (${g.heads.map(h => h.join('@'))})`);
    g = await moveTo(1);
    check(
        g.heads.find(h => h[0] === stepped)[1] === '4',
        `compare: slider at step 4, run ${stepped} at step 4 (${g.heads.map(h => h.join('@'))})`);

    // ---- enlarge: a click, then Escape; the keyboard, then a click
    const heat = `figure[data-kind="policy_heatmap"][data-run="${stepped}"] button.enlarge`;
    await page.$eval(heat, b => b.scrollIntoView({block: 'center'}));
    await page.waitForFunction(h => document.querySelector(h + ' img').naturalWidth > 0, {timeout: 10000}, heat);
    const small = await page.$eval(heat + ' img', i => [i.getBoundingClientRect().width, i.naturalWidth]);
    await page.click(heat);
    await page.waitForFunction(() => document.body.dataset.lightbox === 'open', {timeout: 5000});
    const big =
        await page.$eval('.lightbox img', i => [i.getBoundingClientRect().width, i.getBoundingClientRect().height]);
    check(
        big[0] >= small[1] && big[0] > 1.5 * small[0] && big[0] <= 1400 && big[1] <= 1000,
        `enlarge: the heatmap ${small[0].toFixed(0)} px wide in the page (${small[1]} px its own), ` +
            `${big[0].toFixed(0)} x ${big[1].toFixed(0)} px enlarged, inside the window`);
    if (shots) await page.screenshot({path: path.join(shots, 'serve-picture-enlarged.png')});
    await page.keyboard.press('Escape');
    const closed = await page.evaluate(
        h => [!document.querySelector('.lightbox'), document.activeElement === document.querySelector(h)], heat);
    check(closed[0] && closed[1], `enlarge: Escape closes it, the focus back on the picture (${closed})`);
    const recon = `figure[data-kind="reconstructions"][data-run="${ids[0]}"] button.enlarge`;
    await page.focus(recon);
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => document.body.dataset.lightbox === 'open', {timeout: 5000});
    const keyboard = await page.$$eval('.lightbox .picture-rows span', s => s.map(x => x.textContent));
    await page.mouse.click(20, 20);
    check(
        !(await page.$('.lightbox')) && keyboard.join() === 'input,reconstruction',
        `enlarge: Enter on a focused picture opens it (rows ${keyboard}), a click closes it`);

    // ---- the reconstructions' rows named at their middles
    const labels = await page.$eval(recon, b => {
      const img = b.querySelector('img').getBoundingClientRect();
      return [...b.querySelectorAll('.picture-rows span')].map(s => {
        const r = s.getBoundingClientRect();
        return [s.textContent, ((r.top + r.bottom) / 2 - img.top) / img.height];
      });
    });
    check(
        labels.length === 2 && labels[0][0] === 'input' && labels[1][0] === 'reconstruction' &&
            Math.abs(labels[0][1] - 0.25) < 0.05 && Math.abs(labels[1][1] - 0.75) < 0.05,
        `reconstructions: rows named ${JSON.stringify(labels.map(([t, y]) => [t, y.toFixed(2)]))} (at 1/4 and 3/4)`);
    const width = await page.evaluate(() => document.documentElement.scrollWidth);
    check(width <= 1400, `compare with pictures: ${width} px wide (at most 1400)`);

    // ---- one order of kinds on every page, in both studies
    const order = () => page.$$eval('figure.picture', fs => [...new Set(fs.map(f => f.dataset.kind))]);
    const seen = {};
    for (const [name, url] of [
             ['run', `/run/${stepped}`], ['fixture run', `/run/${ids[0]}`], ['study', '/study/pictures-steps'],
             ['fixture study', '/study/cli-variants']]) {
      await open(name, url);
      seen[name] = await order();
    }
    check(
        Object.values(seen).every(o => JSON.stringify(o) === JSON.stringify(kinds)),
        `kinds in one order (${kinds}) on ${Object.entries(seen).map(([k, v]) => `${k}: ${v}`).join('; ')}`);
    await page.click('figure[data-kind="policy_heatmap"] button.enlarge');  // the study page's too
    await page.waitForFunction(() => document.body.dataset.lightbox === 'open', {timeout: 5000});
    await page.keyboard.press('Escape');
    check(!(await page.$('.lightbox')), 'study: a heatmap enlarged and closed');
  } finally {
    await browser.close();
    server.kill();
    fs.rmSync(work, {recursive: true, force: true});
  }
  verdict('pictures', started);
}
run(main);
