// How long a page of htm serve takes to show, as a browser sees it: Debian's chromium (headless,
// through puppeteer-core from tests/browser), a fresh tab per load, no cache. For each URL, the
// median over --loads of: the HTML's size (bytes as sent, and decompressed), the response's end,
// the first contentful paint, the first screen drawn (body.dataset.firstScreen, set by the study
// page once the charts in view are drawn) and every chart of the page drawn (body.dataset.ready),
// all in ms since the navigation started. One CSV row per URL on standard output.
//   usage: node scripts/serve/draw.js [--loads N] URL...
'use strict';
const path = require('path');
const puppeteer = require(path.join(__dirname, '..', '..', 'tests', 'browser', 'node_modules', 'puppeteer-core'));

async function once(browser, url) {
  const page = await browser.newPage();
  await page.setViewport({width: 1280, height: 900});
  await page.setCacheEnabled(false);
  const client = await page.createCDPSession();
  await client.send('Network.enable');
  let wire = 0;
  client.on('Network.loadingFinished', e => wire += e.encodedDataLength);
  const errors = [];
  page.on('pageerror', e => errors.push(e.message));
  const response = await page.goto(url, {waitUntil: 'domcontentloaded'});
  const html = (await response.text()).length;
  // body.dataset.ready: every chart the page holds data for is drawn (seen at the next frame).
  await page.waitForFunction(
      () => document.body.dataset.ready === 'yes' && (window.htmReady = window.htmReady || performance.now()),
      {timeout: 120000, polling: 'raf'});
  const t = await page.evaluate(() => {
    const nav = performance.getEntriesByType('navigation')[0];
    const paint = performance.getEntriesByName('first-contentful-paint')[0];
    const mark = name => (performance.getEntriesByName(name)[0] || {startTime: NaN}).startTime;
    return {
      response: nav.responseEnd,
      paint: paint ? paint.startTime : NaN,
      first: mark('htm-first-screen'),
      ready: window.htmReady,
      errors: document.getElementById('errors') ? document.getElementById('errors').textContent : ''
    };
  });
  await page.close();
  if (errors.length || t.errors) throw new Error(url + ': ' + (errors.join('; ') || t.errors));
  return Object.assign(t, {html, wire});
}

(async () => {
  const args = process.argv.slice(2);
  let loads = 5;
  if (args[0] === '--loads') loads = Number(args[1]), args.splice(0, 2);
  const browser = await puppeteer.launch(
      {executablePath: process.env.CHROMIUM || '/usr/bin/chromium', args: ['--no-sandbox', '--headless=new']});
  const median = xs => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  console.log('url,loads,html_bytes,transferred_bytes,response_ms,first_paint_ms,first_screen_ms,all_drawn_ms');
  try {
    for (const url of args) {
      await once(browser, url);  // warm: the server's and the browser's first start
      const runs = [];
      for (let i = 0; i < loads; i++) runs.push(await once(browser, url));
      const m = k => {
        const v = median(runs.map(r => r[k]));
        return typeof v === 'number' && isFinite(v) ? v.toFixed(0) : '';
      };
      console.log([url, loads, m('html'), m('wire'), m('response'), m('paint'), m('first'), m('ready')].join(','));
    }
  } finally {
    await browser.close();
  }
})().catch(e => {
  console.error('draw.js: ' + e.message);
  process.exit(1);
});
