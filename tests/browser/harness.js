// What every browser test shares (click_test.js, columns_test.js, notes_test.js, pictures_test.js):
// puppeteer-core, its ok/FAIL lines, `htm serve` started on a free port, and Debian's chromium.
'use strict';
const {spawn} = require('child_process');
let puppeteer;
try {
  puppeteer = require('puppeteer-core');
} catch (e) {
  console.log('FAIL: puppeteer-core is not installed: run scripts/install-deps.sh (npm ci in tests/browser)');
  process.exit(1);
}

// A check's line ("ok   what" or "FAIL what"), failures kept for the test's verdict.
function checker() {
  const failures = [];
  const check = (ok, what) => {
    if (!ok) failures.push(what);
    console.log((ok ? 'ok   ' : 'FAIL ') + what);
  };
  // The last line: "NAME test passed in S s" (what ctest looks for), or the failures' count and exit 1.
  const verdict = (name, started) => {
    const seconds = ((Date.now() - started) / 1000).toFixed(1);
    if (failures.length) {
      console.log(`${name} test: ${failures.length} failure(s) in ${seconds} s`);
      process.exit(1);
    }
    console.log(`${name} test passed in ${seconds} s`);
  };
  return {failures, check, verdict};
}

// A test's main(): an exception is one FAIL line and exit 1.
const run = main => main().catch(e => {
  console.log('FAIL: ' + (e && e.stack || e));
  process.exit(1);
});

// `htm serve --db DB --port 0 EXTRA...` in `cwd`: {server, base} once it prints its address (15 s at most).
async function startServe(htm, db, extra, cwd) {
  const server = spawn(htm, ['serve', '--db', db, '--port', '0', ...extra], {cwd});
  const base = await new Promise((resolve, reject) => {
    let out = '';
    server.stdout.on('data', d => {
      out += d;
      const m = out.match(/http:\/\/[^/ ]+/);
      if (m) resolve(m[0]);
    });
    server.on('exit', code => reject(new Error('htm serve exited ' + code + ': ' + out)));
    server.on('error', reject);
    setTimeout(() => reject(new Error('htm serve did not start: ' + out)), 15000);
  });
  return {server, base};
}

// Chromium, headless: Debian's, or the one $HTM_CHROMIUM names.
const launch = () => puppeteer.launch({
  executablePath: process.env.HTM_CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--hide-scrollbars']
});

module.exports = {
  checker,
  startServe,
  launch,
  run
};
