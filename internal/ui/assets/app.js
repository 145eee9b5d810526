// The live dashboard: polls /ui/api/summary and, when its version moves,
// fetches the timeline, the queue, the shares and the nodes.
//
// Why polling and not server-sent events: the API's bearer tokens travel
// in the Authorization header, which EventSource cannot set (a token in
// the URL would end up in logs and histories), and one small summary
// request every few seconds, answered from memory, costs less than a held
// connection per open tab.
import { el, fmtDur, fmtTime, kindsIn, legend, shown, TimelineView, TimeScale } from './timeline.js';
import { sharesChart } from './shares.js';

const $ = (id) => document.getElementById(id);
const state = { token: null, summary: null, data: null, compareData: null, queue: null, nodes: null, shares: null, version: -1, follow: true, errors: 0, fetched: null };
window.gandiva = { state, ready: false };

// --- the token: from the URL's fragment (#token=...; never sent to a server), then this tab's storage ---
function takeToken() {
  const m = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  if (m) {
    sessionStorage.setItem('gandiva-token', decodeURIComponent(m[1]));
    history.replaceState(null, '', location.pathname + location.search);
  }
  return sessionStorage.getItem('gandiva-token');
}

class AuthError extends Error {}

async function get(path, params) {
  const q = params ? '?' + new URLSearchParams(Object.entries(params).filter(([, v]) => v !== undefined && v !== null && v !== '')) : '';
  const r = await fetch('/ui/api/' + path + q, { headers: { Authorization: 'Bearer ' + state.token }, cache: 'no-store' });
  if (r.status === 401) throw new AuthError('token refused');
  const body = await r.json().catch(() => null);
  if (!r.ok) throw new Error((body && body.error && body.error.message) || `${path}: HTTP ${r.status}`);
  return body;
}

function showLogin(msg) {
  $('main').hidden = true;
  $('login').hidden = false;
  $('login-error').textContent = msg || '';
  $('token').focus();
}

$('login-form').addEventListener('submit', (e) => {
  e.preventDefault();
  const t = $('token').value.trim();
  if (!t) return;
  sessionStorage.setItem('gandiva-token', t);
  state.token = t;
  $('token').value = '';
  start();
});
$('logout').addEventListener('click', () => { sessionStorage.removeItem('gandiva-token'); state.token = null; location.reload(); });

// --- the timeline views ---
const scale = new TimeScale(0, 3600);
let main = null, compare = null;

function views() { return [main, compare].filter(Boolean); }

function setupViews() {
  main = new TimelineView($('tl-main'), scale, { height: 440 });
  window.gandiva.main = main;
  main.host.addEventListener('select', (e) => { for (const v of views()) if (v !== main) { v.selected = e.detail ? e.detail.id : null; v.draw(); } });
  document.querySelectorAll('[data-mode]').forEach((b) => b.addEventListener('click', () => {
    document.querySelectorAll('[data-mode]').forEach((x) => x.classList.toggle('on', x === b));
    for (const v of views()) v.setOptions({ mode: b.dataset.mode });
    $('tl-title').textContent = b.dataset.mode === 'jobs' ? 'Job timeline' : 'GPU timeline';
  }));
  document.querySelectorAll('[data-color]').forEach((b) => b.addEventListener('click', () => {
    document.querySelectorAll('[data-color]').forEach((x) => x.classList.toggle('on', x === b));
    for (const v of views()) v.setOptions({ color: b.dataset.color });
  }));
  $('filter').addEventListener('input', (e) => { for (const v of views()) v.setFilter(e.target.value); });
  $('zoom-in').addEventListener('click', () => { setFollow(false); scale.zoom(0.5); });
  $('zoom-out').addEventListener('click', () => { scale.zoom(2); });
  $('fit').addEventListener('click', () => { setFollow(false); scale.fit(); });
  $('follow').addEventListener('click', () => { setFollow(!state.follow); if (state.follow) followNow(); });
  scale.onChange((src) => {
    if (src !== 'follow' && src !== 'data' && state.follow && scale.t1 < state.summary.now - 1) setFollow(false);
    maybeFetchEarlier();
  });
  document.addEventListener('keydown', (e) => {
    if (e.target.tagName === 'INPUT') return;
    if (e.key === 'Escape') for (const v of views()) v.select(null);
    if (e.key === '+' || e.key === '=') scale.zoom(0.5);
    if (e.key === '-') scale.zoom(2);
  });
  $('compare').addEventListener('change', () => { state.compareData = null; refresh(true); });
}

function setFollow(on) { state.follow = on; $('follow').classList.toggle('on', on); }

function followNow() {
  const now = state.summary.now, span = scale.t1 - scale.t0;
  scale.set(now - span * 0.92, now + span * 0.08, 'follow');
}

// The timeline is fetched for the window in view and one more span
// before it; panning further back fetches again.
let fetchTimer = 0;
function maybeFetchEarlier() {
  if (!state.fetched || scale.t0 >= state.fetched.from) return;
  clearTimeout(fetchTimer);
  fetchTimer = setTimeout(() => refresh(true), 250);
}

function windowToFetch() {
  const span = scale.t1 - scale.t0;
  return { from: Math.max(0, scale.t0 - span) };
}

// --- rendering the rest ---
function card(label, value, sub, frac) {
  return el('div', { class: 'card' }, el('div', { class: 'label', text: label }), el('div', { class: 'value' }, value, sub ? el('small', { text: ' ' + sub }) : null),
    frac !== undefined ? el('div', { class: 'bar' }, el('span', { style: `width:${Math.round(frac * 100)}%` })) : null);
}

function renderSummary(s) {
  $('cluster').textContent = shown(s.cluster || 'cluster');
  $('policy').textContent = shown(s.policy || '');
  $('clock').textContent = fmtTime(s.now, s.epoch, true);
  $('viewer').replaceChildren(el('b', { text: s.viewer.user }), s.viewer.admin ? ' · admin' : '');
  const busy = s.gpus - s.free_gpus;
  const j = s.jobs || {};
  const waiting = (j.queued || 0) + (j.suspended || 0);
  const nodes = s.nodes || {};
  const mine = s.viewer.admin ? '' : 'yours';
  $('cards').replaceChildren(
    card('GPUs in use', busy, `/ ${s.gpus}`, s.gpus ? busy / s.gpus : 0),
    card('running', (j.running || 0) + (j.migrating || 0), mine),
    card('waiting', waiting, (j.suspended ? `${j.suspended} suspended` : '') + (mine ? ' ' + mine : '')),
    card('finished', j.finished || 0, (j.failed ? `${j.failed} failed` : '') + (j.cancelled ? ` ${j.cancelled} cancelled` : '')),
    card('nodes up', nodes.up || 0, [nodes.down ? `${nodes.down} down` : '', nodes.drained ? `${nodes.drained} drained` : ''].filter(Boolean).join(', ') || 'all healthy'),
  );
  const runs = s.runs || [];
  $('runs').hidden = runs.length < 2;
  const sel = $('compare');
  const want = ['', ...runs.slice(1).map((r) => r.id)].join('\n');
  if (sel.dataset.ids !== want) {
    sel.dataset.ids = want;
    const cur = sel.value;
    sel.replaceChildren(el('option', { value: '', text: '—' }), ...runs.slice(1).map((r) => el('option', { value: r.id, text: r.label })));
    sel.value = runs.some((r) => r.id === cur) ? cur : '';
  }
}

// fmtETA is an ETA cell: the time, or, for a forecast over several draws
// of unknown lengths, its median and 80% band ("~14:05 (13:50–16:20)";
// "…" for a band open beyond the forecast). The cell's title says what it
// rests on.
function fmtETA(mid, lo, hi, samples, epoch) {
  if (mid == null) return '—';
  if (!(samples > 1)) return fmtTime(mid, epoch);
  const a = lo == null ? '…' : fmtTime(lo, epoch);
  const b = hi == null ? '…' : fmtTime(hi, epoch);
  return `~${fmtTime(mid, epoch)} (${a}–${b})`;
}

function renderETADetail(q) {
  const box = $('eta-detail');
  const j = state.etaJob == null ? null : q.jobs.find((x) => x.name === state.etaJob);
  box.hidden = !j;
  box.textContent = j ? `ETA of ${j.name}: ${j.eta_note || 'no estimate yet'}` : '';
}

function renderQueue(q, s) {
  const body = $('queue').tBodies[0];
  const rows = [];
  const LIMIT = 200;
  for (const j of q.jobs.slice(0, LIMIT)) {
    rows.push(el('tr', { 'data-job': j.name },
      el('td', { class: 'num', text: j.position }),
      el('td', { text: j.name }),
      el('td', { text: j.user }),
      el('td', {}, el('span', { class: `badge ${j.state}`, text: j.state })),
      el('td', { class: 'num', text: j.gpus }),
      el('td', { class: 'num', text: fmtDur(j.waited) }),
      el('td', { class: 'reason', text: j.reason || '' }),
      el('td', { class: 'eta', title: j.eta_note || 'no estimate yet', text: fmtETA(j.eta_start, j.eta_start_p10, j.eta_start_p90, j.eta_samples, s.epoch) }),
      el('td', { class: 'eta', title: j.eta_note || 'no estimate yet', text: fmtETA(j.eta_finish, j.eta_finish_p10, j.eta_finish_p90, j.eta_samples, s.epoch) })));
  }
  body.replaceChildren(...rows);
  if (!q.jobs.length) body.append(el('tr', {}, el('td', { colspan: 9, class: 'muted', text: 'No job is waiting.' })));
  // a click on an ETA shows what it rests on (its note) under the table
  // until clicked again; it follows the job across refreshes
  for (const td of body.querySelectorAll('td.eta')) {
    td.style.cursor = 'pointer';
    td.addEventListener('click', () => {
      const name = td.parentElement.dataset.job;
      state.etaJob = state.etaJob === name ? null : name;
      renderETADetail(q);
    });
  }
  renderETADetail(q);
  $('queue-order').textContent = q.order === 'policy' ? `in ${shown(q.policy)}'s own order` : 'in submission order';
  const notes = [];
  if (q.jobs.length > LIMIT) notes.push(`${q.jobs.length - LIMIT} more not shown`);
  if (q.hidden) notes.push(`${q.hidden} waiting job${q.hidden > 1 ? 's' : ''} of other users`);
  $('queue-note').textContent = notes.join(' · ');
  renderQueues(s.queues || []);
}

// renderQueues shows the hierarchical queues (Kubernetes' GandivaQueues),
// when there are any, below the shares.
function renderQueues(qs) {
  $('queues-wrap').hidden = !qs.length;
  $('queues').tBodies[0].replaceChildren(...qs.map((q) => el('tr', {},
    el('td', { text: '\u00a0'.repeat(2 * (q.depth || 0)) + q.name }),
    el('td', { text: q.parent || '' }),
    el('td', { class: 'num', text: String(q.tickets) }),
    el('td', { class: 'num', text: String(q.gpus) }),
    el('td', { class: 'num', text: `${Math.round(q.share * 1000) / 10}%` }),
    el('td', { class: 'num', text: String(q.entitlement) }),
    el('td', { text: q.quota || '' }),
    el('td', { class: 'reason', text: q.valid ? 'yes' : `no: ${q.why || ''}` }))));
}

function renderNodes(nodes) {
  const body = $('nodes').tBodies[0];
  const list = nodes.nodes;
  let up = 0;
  body.replaceChildren(...list.map((n) => {
    const status = !n.up ? 'down' : n.drained ? 'drained' : 'up';
    if (status === 'up') up++;
    const used = n.gpus - n.free_gpus;
    return el('tr', { 'data-node': n.name },
      el('td', { text: n.name }),
      el('td', { text: n.gpu_type }),
      el('td', {}, el('span', { class: 'gpubar' }, Array.from({ length: Math.min(n.gpus, 16) }, (_, i) => el('i', { class: i < Math.round(used * Math.min(n.gpus, 16) / n.gpus) ? 'busy' : '' }))), ` ${used}/${n.gpus}`),
      el('td', {}, el('span', { class: `badge ${status}`, text: status })),
      el('td', { class: 'reason', text: n.reason || '' }),
      el('td', { class: 'reason', text: [(n.jobs || []).join(', '), n.other_jobs ? `+${n.other_jobs} of other users` : ''].filter(Boolean).join(' ') }));
  }));
  $('nodes-note').textContent = `${up} of ${list.length} up`;
}

// --- polling ---
async function refresh(force) {
  const s = await get('summary');
  state.summary = s;
  renderSummary(s);
  for (const v of views()) v.opts.epoch = s.epoch;
  if (!force && s.version === state.version) return;
  state.version = s.version;
  const w = windowToFetch();
  const cmp = $('compare').value;
  const t0 = performance.now();
  const [data, queue, nodes, shares, cdata] = await Promise.all([
    get('timeline', w), get('queue'), get('nodes'), get('shares', { from: 0, step: Math.max(1, s.now / 90) }), cmp ? get('timeline', { ...w, run: cmp }) : null]);
  state.data = data; state.queue = queue; state.nodes = nodes; state.shares = shares; state.compareData = cdata;
  state.fetched = { from: w.from };
  const t1 = performance.now();
  const first = !window.gandiva.ready;
  scale.min = data.start; scale.max = Math.max(data.now, cdata ? cdata.now : 0);
  if (first) {
    const span = Math.max(60, Math.min(data.now - data.start, 6 * 3600));
    scale.set(data.now - span * 0.92, data.now + span * 0.08, 'data');
  }
  const present = kindsIn(data);
  if (cdata) for (const k of kindsIn(cdata)) present.add(k);
  $('legend').replaceChildren(legend(data.kinds, present));
  main.setData(data);
  const tMain = performance.now();
  if (cdata) {
    if (!compare) {
      compare = new TimelineView($('tl-compare'), scale, { height: 300, mode: main.opts.mode, color: main.opts.color, epoch: s.epoch });
      window.gandiva.compare = compare;
    }
    const run = (s.runs || []).find((r) => r.id === cmp);
    $('tl-compare-label').textContent = `what-if: ${shown(run ? run.label : cmp)}`;
    $('tl-compare-wrap').hidden = false;
    compare.setData(cdata);
    compare.setFilter($('filter').value);
  } else $('tl-compare-wrap').hidden = true;
  if (state.follow && !first) followNow();
  renderQueue(queue, s);
  renderNodes(nodes);
  sharesChart($('shares'), shares, { epoch: s.epoch });
  $('shares-note').textContent = shares.users.some((u) => u.entitled) ? 'held vs entitled' : 'held';
  const t2 = performance.now();
  window.gandiva.timings = { fetch_ms: Math.round(t1 - t0), render_ms: Math.round(t2 - t1), main_ms: Math.round(tMain - t1) };
  window.gandiva.ready = true;
  document.body.dataset.version = String(s.version);
  document.body.dataset.ready = '1';
}

let timer = 0;
async function poll() {
  clearTimeout(timer);
  try {
    await refresh(false);
    state.errors = 0;
    $('live').className = 'live ok';
    $('live-text').textContent = 'live';
  } catch (e) {
    if (e instanceof AuthError) { showLogin('That token was refused.'); return; }
    state.errors++;
    $('live').className = 'live err';
    $('live-text').textContent = 'reconnecting';
    console.warn('dashboard poll failed:', e);
  }
  const every = (state.summary && state.summary.poll_seconds) || 2;
  timer = setTimeout(poll, Math.min(30, every * (1 + state.errors)) * 1000);
}

function start() {
  $('login').hidden = true;
  $('main').hidden = false;
  if (!main) setupViews();
  poll();
}

state.token = takeToken();
if (state.token) start();
else showLogin('');
