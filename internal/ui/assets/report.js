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

// unpackSegs expands a packed row or lane (internal/ui/pack.go: four
// numbers per segment, ref, kind*8 + open + 2*(start absolute) + 4*(end
// absolute), start as the gap since the previous end, end as the length)
// into the [ref, kind, start, end, open] arrays the timeline draws. The
// additions are the ones the writer checked give back its float64s.
function unpackSegs(v) {
  const out = new Array(v.length / 4);
  let prev = 0;
  for (let i = 0, k = 0; i < v.length; i += 4, k++) {
    const f = v[i + 1];
    const start = f & 2 ? v[i + 2] : prev + v[i + 2];
    const end = f & 4 ? v[i + 3] : start + v[i + 3];
    out[k] = [v[i], Math.floor(f / 8), start, end, f & 1];
    prev = end;
  }
  return out;
}

function unpack(report) {
  for (const r of report.runs || []) {
    const d = r.timeline;
    if (!d || !d.packed) continue;
    d.gpus = (d.gpus || []).map(unpackSegs);
    for (const j of d.jobs || []) if (j.lane) j.lane = unpackSegs(j.lane);
    delete d.packed;
  }
  return report;
}

async function reportMain() {
  const report = unpack(await readData());
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
