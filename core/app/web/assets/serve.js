// htm serve's pages' shared helpers, after page.js: statuses, times, the JSON routes.
'use strict';
const STATUS_CLASS = {
  failed: 'bad',
  killed: 'bad',
  interrupted: 'bad',
  running: 'good'
};
const day = t => t ? new Date(t * 1000).toISOString().replace('T', ' ').slice(0, 19) : '';
const span = s => !(s >= 0) ? '' :
    s < 90                  ? `${s.toFixed(1)} s` :
                     s < 5400 ? `${(s / 60).toFixed(1)} min` :
                                `${(s / 3600).toFixed(2)} h`;
async function get(url) {
  const response = await fetch(url);
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}
