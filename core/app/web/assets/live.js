// htm serve's study page: the version route is polled (cheap); the study is re-read and
// redrawn by report.js's render() only when it changed, never more often than its last read took,
// and never in the middle of a drag across a chart (a zoom being chosen).
// LIVE, the study's JSON route, is set before this script.
'use strict';
(() => {
  let version = null, wait = 2000;
  const banner = document.createElement('p');
  banner.className = 'muted';
  banner.id = 'live';
  const nav = document.createElement('nav');
  for (const [text, href] of [['runs', '/'], ['sweep', '/sweep/' + LIVE.slice('/api/study/'.length)]]) {
    const a = document.createElement('a');
    a.href = href;
    a.textContent = text;
    a.style.marginRight = '14px';
    nav.append(a);
  }
  document.getElementById('header').before(nav, banner);
  async function poll() {
    try {
      const v = await (await fetch(LIVE + '/version')).json();
      banner.textContent =
          v.running ? `live: ${plural(v.running, 'run')} training; redrawn when they log` : 'live: nothing is training';
      if (version !== null && v.version !== version) {
        const started = performance.now();
        const q = new URLSearchParams(location.search);  // ?reference= as the page was asked
        q.set('curves', 'main');                         // the others as the page reads them: after
        const response = await fetch(LIVE + '?' + q);
        if (response.ok) {
          const data = await response.json();
          while (Charts.busy())
            await new Promise(resolve => setTimeout(resolve, 100));  // a drag across a chart ends first
          render(data);
          banner.textContent += ' (updated ' + new Date().toISOString().slice(11, 19) + ' UTC)';  // as the page's times
        }
        wait = Math.max(2000, 2 * (performance.now() - started));
      }
      version = v.version;
    } catch (e) {
      banner.textContent = 'live: the server does not answer (' + e.message + ')';
    }
    setTimeout(poll, wait);
  }
  poll();
})();
