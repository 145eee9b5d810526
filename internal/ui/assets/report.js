// The self-contained report: the data is inlined in #report-data, and this
// file is inlined after timeline.js and shares.js (their imports removed),
// so the page opens from disk with no server.
// readData reads the inlined data: JSON, or (for a large report) gzipped
// JSON in base64, which the browser decompresses itself.
async function readData() {
  const node = document.getElementById('report-data');
  if (node.type !== 'application/gzip+base64') return JSON.parse(node.textContent);
  const bin = atob(node.textContent.trim());
  const bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  const text = await new Response(new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'))).text();
  return JSON.parse(text);
}

async function reportMain() {
  const report = await readData();
  const $ = (id) => document.getElementById(id);
  const runs = report.runs || [];
  let t0 = Infinity, t1 = -Infinity;
  for (const r of runs) { t0 = Math.min(t0, r.timeline.start); t1 = Math.max(t1, r.timeline.now); }
  if (!isFinite(t0)) { t0 = 0; t1 = 1; }
  const scale = new TimeScale(t0, Math.max(t1, t0 + 1));
  scale.min = t0; scale.max = Math.max(t1, t0 + 1);
  const views = [];
  const height = runs.length > 1 ? 320 : 520;
  for (const r of runs) {
    const host = el('div', { class: 'tl-host' });
    const sharesHost = el('div');
    const section = el('section', { class: 'panel', 'data-run': r.label },
      el('div', { class: 'panel-head' }, el('h2', { text: r.label }), r.policy ? el('span', { class: 'muted', text: r.policy }) : null),
      (r.stats || []).length ? el('div', { class: 'stats' }, r.stats.map((s) => el('span', { class: 'stat' }, el('span', { text: s.name }), el('b', { text: s.value })))) : null,
      legend(r.timeline.kinds, kindsIn(r.timeline)), host,
      r.shares && r.shares.users && r.shares.users.length ? el('div', {}, el('div', { class: 'panel-head' }, el('h2', { text: 'Shares of the cluster' })), sharesHost) : null);
    $('runs').append(section);
    const v = new TimelineView(host, scale, { height, epoch: r.epoch || 0 });
    v.setData(r.timeline);
    views.push(v);
    if (r.shares) sharesChart(sharesHost, r.shares, { epoch: r.epoch || 0, height: 200, t0, t1 });
    host.addEventListener('select', (e) => { for (const o of views) if (o !== v) { o.selected = e.detail ? e.detail.id : null; o.draw(); } });
  }
  document.querySelectorAll('[data-mode]').forEach((b) => b.addEventListener('click', () => {
    document.querySelectorAll('[data-mode]').forEach((x) => x.classList.toggle('on', x === b));
    for (const v of views) v.setOptions({ mode: b.dataset.mode });
  }));
  document.querySelectorAll('[data-color]').forEach((b) => b.addEventListener('click', () => {
    document.querySelectorAll('[data-color]').forEach((x) => x.classList.toggle('on', x === b));
    for (const v of views) v.setOptions({ color: b.dataset.color });
  }));
  $('filter').addEventListener('input', (e) => { for (const v of views) v.setFilter(e.target.value); });
  $('zoom-in').addEventListener('click', () => scale.zoom(0.5));
  $('zoom-out').addEventListener('click', () => scale.zoom(2));
  $('fit').addEventListener('click', () => scale.fit());
  scale.fit();
  window.gandiva = { report, views, main: views[0], ready: true };
  document.body.dataset.ready = '1';
}
reportMain();
