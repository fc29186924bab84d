'use strict';
// A run's pictures on htm serve's run, compare and study pages (and htm report's file): each a figure
// whose image opens large on a click, or Enter or Space (it is a button), closed by Escape, a click or
// its close button, the focus then back where it was. A picture made of rows has them named beside it:
// the reconstructions are the first test inputs (above) and the model's reconstructions of them
// (below), write_image_grid's and write_point_grid's two rows (core/src/train/artifacts.cpp). Kinds
// are shown in one order on every page: by name. After page.js.
const Pictures = (() => {
  const ROWS = {reconstructions: ['input', 'reconstruction']};
  const byKind = (a, b) => a.kind < b.kind ? -1 : a.kind > b.kind ? 1 : 0;
  const rows = kind => ROWS[kind] ?
      el('div', {class: 'picture-rows', 'aria-hidden': 'true'},
         ...ROWS[kind].map((name, r) => el('span', {style: `top:${(r + 0.5) / ROWS[kind].length * 100}%`}, name))) :
      '';
  let box = null, opener = null;
  function close() {
    if (!box) return;
    box.remove();
    box = null;
    document.body.dataset.lightbox = 'closed';
    if (opener && opener.isConnected) opener.focus();
  }
  // The picture as large as the window allows (larger than its own size too), its rows named beside it.
  function open(src, kind, caption, from = null) {
    close();
    opener = from;
    const img = el('img', {src, alt: `${kind}: ${caption}`, class: 'kind-' + kind});
    const fit = () => {
      const scale = Math.min((innerWidth - 200) / img.naturalWidth, (innerHeight - 120) / img.naturalHeight);
      Object.assign(img.style, {width: img.naturalWidth * scale + 'px', height: img.naturalHeight * scale + 'px'});
      document.body.dataset.lightbox = 'open';
    };
    img.addEventListener('load', fit);
    const shut = el('button', {type: 'button', class: 'lightbox-close', 'aria-label': 'close'}, '×');
    box =
        el('div', {class: 'lightbox', role: 'dialog', 'aria-modal': 'true', 'aria-label': `${kind}: ${caption}`},
           el('figure', {}, el('div', {class: 'picture-body'}, rows(kind), img),
              el('figcaption', {},
                 `${caption.includes(kind) ? '' : kind + ', '}${caption} (Escape or a click closes it)`)),
           shut);
    box.addEventListener('click', close);
    document.body.append(box);
    document.body.dataset.lightbox = 'opening';
    if (img.complete && img.naturalWidth) fit();
    shut.focus();
  }
  document.addEventListener('keydown', e => {
    if (!box) return;
    if (e.key === 'Escape') close();
    if (e.key === 'Tab') e.preventDefault(), box.querySelector('button').focus();  // the dialog keeps the focus
  });
  // A picture: its address, kind and caption; `attrs` on the figure.
  function figure(src, kind, caption, attrs = {}) {
    const button = el(
        'button', {type: 'button', class: 'enlarge', title: 'enlarge', 'aria-label': `enlarge ${kind}: ${caption}`},
        el('div', {class: 'picture-body'}, rows(kind), el('img', {src, alt: `${kind}: ${caption}`, loading: 'lazy'})));
    button.addEventListener('click', () => open(src, kind, caption, button));
    return el(
        'figure', Object.assign({class: 'picture', 'data-kind': kind}, attrs), button, el('figcaption', {}, caption));
  }
  // Of `pictures` ({kind, step}, ...), each kind as it was at `step` (its latest at or before it, else its
  // first), by kind.
  function at(pictures, step) {
    const kinds = new Map();
    for (const p of pictures.slice().sort((a, b) => (a.step ?? 0) - (b.step ?? 0))) {
      const had = kinds.get(p.kind);
      if (!had || (p.step ?? 0) <= step) kinds.set(p.kind, p);
    }
    return [...kinds.values()].sort(byKind);
  }
  // The step of `steps` (sorted) nearest to `step` (the lower of two as near).
  const nearest = (steps, step) =>
      steps.reduce((best, s) => Math.abs(s - step) < Math.abs(best - step) ? s : best, steps[0]);
  return {figure, open, close, at, nearest, byKind};
})();
