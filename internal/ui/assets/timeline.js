// The GPU timeline: one row per GPU (or per job), segments on a canvas.
// Shared by the dashboard (app.js) and the self-contained report
// (report.js): it reads the JSON of internal/timeline.Data and knows
// nothing of where it came from.
//
// Rendering is virtualised: a tall spacer scrolls, a canvas the size of
// the viewport is redrawn with the rows in view only, and each row's
// segments are found by binary search on time, so thousands of GPUs and
// tens of thousands of segments stay smooth.

// --- small helpers shared by the other modules ---

// HIDDEN matches what a user, a job or a node could put in a name, a
// command or a GPU type to reorder or hide the text around it rather than
// show as a glyph: controls (Cc), bidirectional and other invisible format
// characters (Cf: U+202E, U+2066, zero-width ones, ...) and the line and
// paragraph separators, as internal/visible.Hidden does for the CLI.
const HIDDEN = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/gu;
const NAMED = { 7: '\\a', 8: '\\b', 9: '\\t', 10: '\\n', 11: '\\v', 12: '\\f', 13: '\\r' };

// shown returns s as text with every HIDDEN character written as an escape
// (\x1b, \u202e, \U000e0041), as the CLI prints them: the page never
// parses data as HTML (textContent, attributes, canvas text), and this
// keeps the text it shows from being reordered or hidden. el applies it to
// all the text and titles it sets.
export function shown(s) {
  return String(s).replace(HIDDEN, (c) => {
    const n = c.codePointAt(0);
    if (NAMED[n]) return NAMED[n];
    if (n < 0x80) return '\\x' + n.toString(16).padStart(2, '0');
    if (n < 0x10000) return '\\u' + n.toString(16).padStart(4, '0');
    return '\\U' + n.toString(16).padStart(8, '0');
  });
}

export function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = shown(v);
    else if (k === 'title' || k === 'aria-label') e.setAttribute(k, shown(v));
    else if (k === 'style') e.style.cssText = v; // CSSOM: allowed by the page's CSP, unlike a style attribute
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(shown(c)));
  }
  return e;
}

// fmtDur formats seconds as "1d 2h", "3h 05m", "4m 07s", "12.3s".
export function fmtDur(s) {
  if (!isFinite(s)) return '—';
  const neg = s < 0;
  s = Math.abs(s);
  let out;
  if (s < 10) out = s.toFixed(s < 1 ? 2 : 1) + 's';
  else if (s < 60) out = Math.round(s) + 's';
  else if (s < 3600) out = Math.floor(s / 60) + 'm ' + String(Math.floor(s % 60)).padStart(2, '0') + 's';
  else if (s < 86400) out = Math.floor(s / 3600) + 'h ' + String(Math.floor((s % 3600) / 60)).padStart(2, '0') + 'm';
  else out = Math.floor(s / 86400) + 'd ' + Math.floor((s % 86400) / 3600) + 'h';
  return (neg ? '−' : '') + out;
}

// fmtTick formats an axis tick of step seconds compactly: "0", "45s",
// "10m", "1h 30m", "2d 4h".
export function fmtTick(t, step) {
  if (t === 0) return '0';
  const neg = t < 0;
  t = Math.abs(t);
  const parts = [];
  const d = Math.floor(t / 86400), h = Math.floor((t % 86400) / 3600), m = Math.floor((t % 3600) / 60), sec = t % 60;
  if (d) parts.push(d + 'd');
  if (h) parts.push(h + 'h');
  if (m && d === 0) parts.push(m + 'm');
  if (sec && step < 60 && d === 0 && h === 0) parts.push((step < 1 ? sec.toFixed(step < 0.1 ? 2 : 1) : Math.round(sec)) + 's');
  return (neg ? '−' : '') + (parts.join(' ') || '0');
}

// fmtTime formats an engine time: wall-clock when epoch is set, else an
// offset from the run's start ("+1h 20m").
export function fmtTime(t, epoch, withDate) {
  if (!isFinite(t)) return '—';
  if (epoch > 0) {
    const d = new Date((epoch + t) * 1000);
    const hms = d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit', hour12: false });
    return withDate ? d.toLocaleDateString([], { month: 'short', day: 'numeric' }) + ' ' + hms : hms;
  }
  return 't=' + fmtDur(t).replace('−', '-');
}

// hue spreads integers over the colour wheel (golden angle).
function hue(n) { return ((n * 137.508) % 360 + 360) % 360; }

function hashString(s) {
  let h = 2166136261;
  for (let i = 0; i < s.length; i++) { h ^= s.charCodeAt(i); h = Math.imul(h, 16777619); }
  return h >>> 0;
}

export function jobColor(id) { return `hsl(${hue(id + 1).toFixed(1)} 62% 56%)`; }

// Users get distinct colours from a palette, in the order they are first
// seen (registerUsers sorts a batch first, so a page's colours follow the
// users' names); past the palette, hashed hues.
const PALETTE = ['#4e9cf5', '#f2a33a', '#3fbf7f', '#e4637b', '#a98bf0', '#3cc6c6', '#d6c440', '#f07fd0', '#9fbf5a', '#c98a5e'];
const userColors = new Map();
export function registerUsers(users) {
  for (const u of [...new Set(users)].sort()) userColor(u);
}
export function userColor(user) {
  let c = userColors.get(user);
  if (!c) {
    c = userColors.size < PALETTE.length ? PALETTE[userColors.size] : `hsl(${hue(hashString(user) % 997).toFixed(1)} 58% 58%)`;
    userColors.set(user, c);
  }
  return c;
}

// --- the shared time scale (several views pan and zoom together) ---

export class TimeScale {
  constructor(t0, t1) { this.t0 = t0; this.t1 = t1; this.listeners = new Set(); this.min = 0; this.max = t1; }
  set(t0, t1, source) {
    const minSpan = 1e-3;
    if (t1 - t0 < minSpan) { const m = (t0 + t1) / 2; t0 = m - minSpan / 2; t1 = m + minSpan / 2; }
    this.t0 = t0; this.t1 = t1;
    for (const f of this.listeners) f(source);
  }
  zoom(factor, at) {
    const a = at === undefined ? (this.t0 + this.t1) / 2 : at;
    this.set(a - (a - this.t0) * factor, a + (this.t1 - a) * factor);
  }
  pan(dt) { this.set(this.t0 + dt, this.t1 + dt); }
  fit() { this.set(this.min, Math.max(this.max, this.min + 1)); }
  onChange(f) { this.listeners.add(f); return () => this.listeners.delete(f); }
}

const GUTTER = 168;
const AXIS_H = 26;
const BAND_H = 4;

// niceStep picks an axis tick interval for a span of seconds over px pixels.
function niceStep(span, px) {
  const target = span / Math.max(1, px / 110);
  const steps = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800,
    3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800, 1209600, 2592000];
  for (const s of steps) if (s >= target) return s;
  return steps[steps.length - 1] * Math.ceil(target / steps[steps.length - 1]);
}

// TimelineView draws one timeline.Data in a host element.
export class TimelineView {
  constructor(host, scale, opts = {}) {
    this.host = host;
    this.scale = scale;
    this.rowH = 18;
    this.opts = Object.assign({ mode: 'gpus', color: 'job', epoch: 0, height: 460, title: '' }, opts);
    this.data = null;
    this.rows = [];
    this.filter = '';
    this.selected = null; // a job id pinned by a click
    this.hover = null;
    host.classList.add('tl');
    this.axis = el('canvas', { class: 'tl-axis' });
    this.body = el('div', { class: 'tl-body' });
    this.spacer = el('div', { class: 'tl-spacer' });
    this.canvas = el('canvas', { class: 'tl-canvas' });
    this.tip = el('div', { class: 'tl-tip', role: 'tooltip', hidden: true });
    this.empty = el('div', { class: 'tl-empty', hidden: true });
    this.body.append(this.canvas, this.spacer);
    host.append(this.axis, this.body, this.tip, this.empty);
    this.body.style.height = this.opts.height + 'px';
    this.body.addEventListener('scroll', () => this.draw());
    this.unsub = scale.onChange(() => this.draw());
    new ResizeObserver(() => this.resize()).observe(this.body);
    this.bindPointer();
    this.stripes = null;
    this.resize();
  }

  setOptions(o) { Object.assign(this.opts, o); this.buildRows(); this.draw(); }
  setFilter(s) { this.filter = (s || '').trim().toLowerCase(); this.buildRows(); this.draw(); }

  setData(data) {
    this.data = data;
    registerUsers((data.jobs || []).map((j) => j.user));
    this.kinds = data.kinds;
    this.jobs = new Map();
    for (const j of data.jobs || []) this.jobs.set(j.id, j);
    this.buildRows();
    this.draw();
  }

  // buildRows turns the data into drawable rows, each with its segments
  // sorted by start, a running maximum of their ends (for the binary
  // search) and, for holders sharing a GPU, sub-lanes.
  buildRows() {
    const d = this.data;
    if (!d) return;
    const rows = [];
    const f = this.filter;
    const match = (j) => !f || (j && (j.name.toLowerCase().includes(f) || j.user.toLowerCase().includes(f)));
    this.matching = f ? new Set([...this.jobs.values()].filter(match).map((j) => j.id)) : null;
    if (this.opts.mode === 'jobs') {
      const jobs = [...this.jobs.values()].filter((j) => !j.probe && match(j));
      jobs.sort((a, b) => a.submitted - b.submitted || a.id - b.id);
      for (const j of jobs) {
        const segs = (j.lane || []).map((s) => ({ job: j.id, gpus: s[0], kind: s[1], start: s[2], end: s[3], open: s[4] === 1 }));
        rows.push(this.prepRow({ label: j.name, sub: j.user, job: j, segs }));
      }
    } else {
      (d.servers || []).forEach((sv, si) => {
        for (let i = 0; i < sv.gpus; i++) {
          const g = sv.first_gpu + i;
          const segs = (d.gpus[g] || []).map((s) => ({ job: s[0], kind: s[1], start: s[2], end: s[3], open: s[4] === 1 }));
          rows.push(this.prepRow({ label: i === 0 ? sv.name : '', sub: `${sv.type} #${i}`, gpu: g, server: si, first: i === 0, segs }));
        }
      });
    }
    this.rows = rows;
    // roomy rows when there are few; the body no taller than its rows
    this.rowH = rows.length <= 32 ? 24 : 18;
    this.body.style.height = Math.max(96, Math.min(this.opts.height, rows.length * this.rowH + 2)) + 'px';
    this.spacer.style.height = rows.length * this.rowH + 'px';
    this.empty.hidden = rows.length > 0;
    this.empty.textContent = rows.length ? '' : (f ? 'No job matches the filter.' : 'Nothing recorded yet.');
  }

  prepRow(row) {
    const segs = row.segs;
    segs.sort((a, b) => a.start - b.start || a.job - b.job);
    row.maxEnd = new Float64Array(segs.length);
    let m = -Infinity;
    for (let i = 0; i < segs.length; i++) { m = Math.max(m, segs[i].end); row.maxEnd[i] = m; }
    // sub-lanes: within each cluster of overlapping holders, greedy lanes
    let cluster = [], clusterEnd = -Infinity, laneEnds = [];
    const flush = () => { for (const s of cluster) s.lanes = laneEnds.length; cluster = []; laneEnds = []; };
    for (const s of segs) {
      const info = this.kinds[s.kind] || {};
      if (info.style === 'band') { s.band = true; continue; }
      if (s.start >= clusterEnd) flush();
      let k = laneEnds.findIndex((e) => e <= s.start);
      if (k < 0) { k = laneEnds.length; laneEnds.push(s.end); } else laneEnds[k] = s.end;
      s.lane = k;
      cluster.push(s);
      clusterEnd = Math.max(clusterEnd === -Infinity ? s.end : clusterEnd, s.end);
    }
    flush();
    return row;
  }

  resize() {
    const dpr = window.devicePixelRatio || 1;
    const w = this.body.clientWidth, h = this.body.clientHeight;
    this.w = w; this.h = h; this.dpr = dpr;
    for (const [c, ch] of [[this.canvas, h], [this.axis, AXIS_H]]) {
      c.width = Math.max(1, Math.round(w * dpr)); c.height = Math.round(ch * dpr);
      c.style.width = w + 'px'; c.style.height = ch + 'px';
    }
    this.draw();
  }

  x(t) { const s = this.scale; return GUTTER + (t - s.t0) / (s.t1 - s.t0) * (this.w - GUTTER - 8); }
  t(x) { const s = this.scale; return s.t0 + (x - GUTTER) / (this.w - GUTTER - 8) * (s.t1 - s.t0); }

  // firstIndex returns the first segment of row whose running maximum end
  // passes t: no segment before it can be visible at t or later.
  firstIndex(row, t) {
    let lo = 0, hi = row.segs.length;
    while (lo < hi) { const mid = (lo + hi) >> 1; if (row.maxEnd[mid] > t) hi = mid; else lo = mid + 1; }
    return lo;
  }

  colorOf(s) {
    if (s.job < 0) return '#3b4452';
    const info = this.kinds[s.kind] || {};
    const j = this.jobs.get(s.job);
    switch (this.opts.color) {
      case 'kind': return info.color || '#888';
      case 'user': return j ? userColor(j.user) : '#888';
      default: return jobColor(j && j.probe ? j.parent : s.job);
    }
  }

  stripePattern(ctx) {
    if (this.stripes) return this.stripes;
    const c = document.createElement('canvas');
    c.width = c.height = 8;
    const g = c.getContext('2d');
    g.strokeStyle = 'rgba(255,255,255,0.55)';
    g.lineWidth = 2;
    g.beginPath(); g.moveTo(-2, 10); g.lineTo(10, -2); g.moveTo(6, 10); g.lineTo(10, 6); g.moveTo(-2, 2); g.lineTo(2, -2); g.stroke();
    this.stripes = ctx.createPattern(c, 'repeat');
    return this.stripes;
  }

  dimmed(s) {
    if (this.selected !== null) return s.job !== this.selected;
    if (this.matching) return !this.matching.has(s.job);
    return false;
  }

  draw() {
    if (this.pending) return;
    this.pending = requestAnimationFrame(() => { this.pending = 0; this.paint(); });
  }

  paint() {
    const ctx = this.canvas.getContext('2d');
    const { w, h, dpr } = this;
    if (!w || !h) return;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, h);
    this.paintAxis();
    if (!this.data) return;
    const top = this.body.scrollTop;
    this.canvas.style.transform = `translateY(${top}px)`;
    const r0 = Math.max(0, Math.floor(top / this.rowH));
    const r1 = Math.min(this.rows.length, Math.ceil((top + h) / this.rowH));
    const s = this.scale;
    const xEnd = w - 8;
    ctx.save();
    ctx.beginPath(); ctx.rect(GUTTER, 0, w - GUTTER, h); ctx.clip();
    // day/night of the axis grid
    ctx.strokeStyle = 'rgba(255,255,255,0.05)';
    const step = niceStep(s.t1 - s.t0, w - GUTTER);
    for (let t = Math.ceil(s.t0 / step) * step; t <= s.t1; t += step) {
      const x = Math.round(this.x(t)) + 0.5;
      ctx.beginPath(); ctx.moveTo(x, 0); ctx.lineTo(x, h); ctx.stroke();
    }
    for (let r = r0; r < r1; r++) {
      const row = this.rows[r];
      const y = r * this.rowH - top;
      if (r % 2 === 0) { ctx.fillStyle = 'rgba(255,255,255,0.018)'; ctx.fillRect(GUTTER, y, w - GUTTER, this.rowH); }
      if (row.first && r > 0) { ctx.fillStyle = 'rgba(255,255,255,0.10)'; ctx.fillRect(GUTTER, y, w - GUTTER, 1); }
      const segs = row.segs;
      for (let i = this.firstIndex(row, s.t0); i < segs.length; i++) {
        const sg = segs[i];
        if (sg.start > s.t1) break;
        if (sg.end < s.t0) continue;
        let x0 = this.x(sg.start), x1 = this.x(sg.end);
        x0 = Math.max(x0, GUTTER - 1); x1 = Math.min(x1, xEnd + 1);
        const wd = Math.max(1, x1 - x0);
        const info = this.kinds[sg.kind] || {};
        const col = this.colorOf(sg);
        ctx.globalAlpha = this.dimmed(sg) ? 0.16 : 1;
        if (sg.band) {
          ctx.fillStyle = col;
          ctx.globalAlpha *= 0.8;
          ctx.fillRect(x0, y + this.rowH - BAND_H - 1, wd, BAND_H);
          continue;
        }
        const lanes = sg.lanes || 1;
        const lh = (this.rowH - BAND_H - 3) / lanes;
        const ly = y + 1 + sg.lane * lh;
        ctx.fillStyle = col;
        if (info.style === 'light') ctx.globalAlpha *= 0.5;
        ctx.fillRect(x0, ly, wd, lh - (lanes > 1 ? 1 : 0));
        if (info.style === 'hatch' || sg.job < 0) {
          ctx.fillStyle = this.stripePattern(ctx);
          ctx.fillRect(x0, ly, wd, lh - (lanes > 1 ? 1 : 0));
        }
        if (sg.open && x1 <= xEnd) { ctx.fillStyle = 'rgba(255,255,255,0.6)'; ctx.fillRect(x1 - 1, ly, 1, lh - 1); }
        if (wd > 46 && lh >= 10 && sg.job >= 0) {
          const j = this.jobs.get(sg.job);
          if (j) {
            ctx.globalAlpha = this.dimmed(sg) ? 0.3 : 0.95;
            ctx.fillStyle = '#0b0f14';
            ctx.font = `${Math.min(11, lh - 3)}px system-ui, sans-serif`;
            ctx.fillText(shown(j.name), Math.max(x0, GUTTER) + 3, ly + lh / 2 + 3.5, wd - 6);
          }
        }
      }
      ctx.globalAlpha = 1;
    }
    // the hovered segment's outline
    if (this.hover && this.hover.row >= r0 && this.hover.row < r1) {
      const sg = this.hover.seg, y = this.hover.row * this.rowH - top;
      const x0 = Math.max(this.x(sg.start), GUTTER), x1 = Math.min(this.x(sg.end), xEnd);
      ctx.strokeStyle = '#fff'; ctx.lineWidth = 1.5;
      if (sg.band) ctx.strokeRect(x0, y + this.rowH - BAND_H - 1, Math.max(1, x1 - x0), BAND_H);
      else { const lanes = sg.lanes || 1, lh = (this.rowH - BAND_H - 3) / lanes; ctx.strokeRect(x0, y + 1 + sg.lane * lh, Math.max(1, x1 - x0), lh - 1); }
    }
    // now
    const xn = this.x(this.data.now);
    if (xn >= GUTTER && xn <= w) {
      ctx.strokeStyle = '#ff5c5c'; ctx.lineWidth = 1; ctx.setLineDash([3, 3]);
      ctx.beginPath(); ctx.moveTo(xn + 0.5, 0); ctx.lineTo(xn + 0.5, h); ctx.stroke(); ctx.setLineDash([]);
    }
    ctx.restore();
    // labels
    ctx.fillStyle = '#0d1117';
    ctx.fillRect(0, 0, GUTTER - 4, h);
    ctx.font = '11px system-ui, sans-serif';
    for (let r = r0; r < r1; r++) {
      const row = this.rows[r];
      const y = r * this.rowH - top;
      if (row.first && r > 0) { ctx.fillStyle = 'rgba(255,255,255,0.10)'; ctx.fillRect(0, y, GUTTER - 4, 1); }
      if (this.opts.mode === 'jobs') {
        const j = row.job;
        const ty = y + this.rowH / 2 + 4;
        ctx.fillStyle = userColor(j.user); ctx.fillRect(6, ty - 8, 6, 8);
        ctx.fillStyle = '#d6dde6'; ctx.fillText(shown(j.name), 17, ty, 92);
        ctx.fillStyle = '#7d8896'; ctx.fillText(shown(j.user), 112, ty, GUTTER - 118);
      } else {
        const ty = y + this.rowH / 2 + 4;
        if (row.label) { ctx.fillStyle = '#d6dde6'; ctx.fillText(shown(row.label), 8, ty, 100); }
        ctx.fillStyle = '#7d8896'; ctx.fillText(shown(row.sub), 110, ty, GUTTER - 114);
      }
    }
  }

  paintAxis() {
    const ctx = this.axis.getContext('2d');
    const { w, dpr } = this;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, AXIS_H);
    ctx.fillStyle = '#0d1117';
    ctx.fillRect(0, 0, w, AXIS_H);
    const s = this.scale;
    const step = niceStep(s.t1 - s.t0, w - GUTTER);
    ctx.font = '11px system-ui, sans-serif';
    ctx.fillStyle = '#8b96a3';
    ctx.fillText(this.opts.title || (this.opts.mode === 'jobs' ? 'job' : 'node · GPU'), 8, 17, GUTTER - 12);
    ctx.strokeStyle = 'rgba(255,255,255,0.25)';
    let lastDay = '';
    for (let t = Math.ceil(s.t0 / step) * step; t <= s.t1; t += step) {
      const x = Math.round(this.x(t)) + 0.5;
      if (x < GUTTER) continue;
      ctx.beginPath(); ctx.moveTo(x, AXIS_H - 6); ctx.lineTo(x, AXIS_H); ctx.stroke();
      let label;
      if (this.opts.epoch > 0) {
        const d = new Date((this.opts.epoch + t) * 1000);
        const day = d.toDateString();
        label = fmtTime(t, this.opts.epoch, day !== lastDay && step >= 3600);
        lastDay = day;
      } else label = fmtTick(t, step);
      ctx.fillStyle = '#aab4c0';
      ctx.fillText(label, x + 3, 15);
    }
  }

  // hit finds the segment under a point of the canvas (CSS pixels).
  hit(px, py) {
    if (!this.data || px < GUTTER) return null;
    const top = this.body.scrollTop;
    const r = Math.floor((py + top) / this.rowH);
    const row = this.rows[r];
    if (!row) return null;
    const t = this.t(px);
    const tol = (this.scale.t1 - this.scale.t0) / (this.w - GUTTER) * 2; // 2 px
    const yIn = py + top - r * this.rowH;
    let best = null;
    for (let i = this.firstIndex(row, t - tol); i < row.segs.length; i++) {
      const sg = row.segs[i];
      if (sg.start > t + tol) break;
      if (sg.end < t - tol) continue;
      if (sg.band) {
        if (yIn >= this.rowH - BAND_H - 3 || !best) best = best && !best.band && yIn < this.rowH - BAND_H - 3 ? best : sg;
        continue;
      }
      const lanes = sg.lanes || 1, lh = (this.rowH - BAND_H - 3) / lanes;
      const k = Math.min(lanes - 1, Math.max(0, Math.floor((yIn - 1) / lh)));
      if (k === sg.lane && (!best || best.band) && yIn < this.rowH - BAND_H - 1) best = sg;
      else if (!best) best = sg;
    }
    return best ? { row: r, seg: best, rowData: row } : null;
  }

  bindPointer() {
    const c = this.body;
    let drag = null;
    c.addEventListener('pointerdown', (e) => {
      if (e.button !== 0) return;
      drag = { x: e.clientX, t0: this.scale.t0, t1: this.scale.t1, moved: false };
      c.setPointerCapture(e.pointerId);
    });
    c.addEventListener('pointermove', (e) => {
      const rect = c.getBoundingClientRect();
      const px = e.clientX - rect.left, py = e.clientY - rect.top;
      if (drag) {
        const dx = e.clientX - drag.x;
        if (Math.abs(dx) > 3) drag.moved = true;
        if (drag.moved) {
          const dt = -dx / (this.w - GUTTER - 8) * (drag.t1 - drag.t0);
          this.scale.set(drag.t0 + dt, drag.t1 + dt, this);
          this.hideTip();
          return;
        }
      }
      this.showTipAt(px, py);
    });
    c.addEventListener('pointerup', (e) => {
      const rect = c.getBoundingClientRect();
      if (drag && !drag.moved) {
        const h = this.hit(e.clientX - rect.left, e.clientY - rect.top);
        this.select(h && h.seg.job >= 0 && this.selected !== h.seg.job ? h.seg.job : null);
      }
      drag = null;
    });
    c.addEventListener('pointerleave', () => { if (!drag) this.hideTip(); });
    c.addEventListener('wheel', (e) => {
      if (e.ctrlKey || e.metaKey || e.altKey) {
        e.preventDefault();
        const rect = c.getBoundingClientRect();
        this.scale.zoom(Math.exp(e.deltaY * 0.002), this.t(e.clientX - rect.left));
      } else if (e.shiftKey || Math.abs(e.deltaX) > Math.abs(e.deltaY)) {
        e.preventDefault();
        const d = e.deltaX || e.deltaY;
        this.scale.pan(d / (this.w - GUTTER) * (this.scale.t1 - this.scale.t0));
      }
    }, { passive: false });
    c.addEventListener('dblclick', (e) => {
      const rect = c.getBoundingClientRect();
      this.scale.zoom(e.shiftKey ? 2 : 0.5, this.t(e.clientX - rect.left));
    });
  }

  select(id) {
    this.selected = id;
    this.draw();
    this.host.dispatchEvent(new CustomEvent('select', { detail: id === null ? null : this.jobs.get(id) }));
  }

  hideTip() {
    this.tip.hidden = true;
    if (this.hover) { this.hover = null; this.draw(); }
  }

  showTipAt(px, py) {
    const h = this.hit(px, py);
    if (!h) { this.hideTip(); return; }
    this.hover = h;
    this.draw();
    const sg = h.seg;
    const info = this.kinds[sg.kind] || { label: '?' };
    const j = this.jobs.get(sg.job);
    const ep = this.opts.epoch;
    const lines = [];
    if (sg.job < 0) {
      lines.push(el('div', { class: 'tip-title', text: "another user's job" }));
    } else {
      lines.push(el('div', { class: 'tip-title' }, el('span', { class: 'swatch', style: `background:${this.colorOf(sg)}` }), j ? j.name : 'job ' + sg.job));
      if (j) lines.push(el('div', {}, el('span', { class: 'k', text: 'user' }), j.user, '  ', el('span', { class: 'k', text: 'gang' }), `${j.gpus} GPU${j.gpus > 1 ? 's' : ''}`));
    }
    lines.push(el('div', {}, el('span', { class: 'k', text: 'kind' }), el('b', { text: info.label }), sg.gpus ? ` on ${sg.gpus} GPU${sg.gpus > 1 ? 's' : ''}` : ''));
    lines.push(el('div', { class: 'tip-doc', text: info.doc || '' }));
    lines.push(el('div', {}, el('span', { class: 'k', text: 'from' }), fmtTime(sg.start, ep), el('span', { class: 'k', text: ' to' }), sg.open ? 'now' : fmtTime(sg.end, ep), `  (${fmtDur(sg.end - sg.start)}${sg.open ? ', ongoing' : ''})`));
    if (h.rowData.gpu !== undefined) {
      const sv = this.data.servers[h.rowData.server];
      lines.push(el('div', {}, el('span', { class: 'k', text: 'GPU' }), `${sv.name} #${h.rowData.gpu - sv.first_gpu} (${sv.type}, id ${h.rowData.gpu})`));
    }
    if (j) lines.push(el('div', {}, el('span', { class: 'k', text: 'state now' }), j.state + (j.reason ? ` — ${j.reason}` : '')));
    this.tip.replaceChildren(...lines);
    this.tip.hidden = false;
    const hostRect = this.host.getBoundingClientRect(), bodyRect = this.body.getBoundingClientRect();
    let left = bodyRect.left - hostRect.left + px + 14, top = bodyRect.top - hostRect.top + py + 14;
    const tw = this.tip.offsetWidth, th = this.tip.offsetHeight;
    if (left + tw > hostRect.width) left = Math.max(0, left - tw - 28);
    if (top + th > hostRect.height + 40) top = Math.max(0, top - th - 28);
    this.tip.style.left = left + 'px';
    this.tip.style.top = top + 'px';
  }

  // --- for tests and tools ---

  // segmentsOf returns what the view holds for the job named name: each
  // segment with its row (GPU id, or the job's lane), kind and times.
  segmentsOf(name) {
    const out = [];
    for (const row of this.rows) {
      for (const s of row.segs) {
        const j = this.jobs.get(s.job);
        if (j && j.name === name) out.push({ gpu: row.gpu, kind: this.kinds[s.kind].kind, start: s.start, end: s.end, open: s.open });
      }
    }
    return out;
  }

  // pointFor returns viewport coordinates inside the segment of job name on
  // GPU gpu (or the job's lane) that covers time t, after scrolling its row
  // into view; null if there is none or it is out of the time window.
  pointFor(name, gpu, t) {
    const r = this.rows.findIndex((row) => (gpu === undefined ? row.job && row.job.name === name : row.gpu === gpu));
    if (r < 0) return null;
    const row = this.rows[r];
    const sg = row.segs.find((s) => { const j = this.jobs.get(s.job); return j && j.name === name && s.start <= t && t <= s.end && !s.band; });
    if (!sg) return null;
    this.body.scrollTop = Math.max(0, r * this.rowH - this.h / 2);
    this.paint();
    const top = this.body.scrollTop;
    const lanes = sg.lanes || 1, lh = (this.rowH - BAND_H - 3) / lanes;
    const rect = this.body.getBoundingClientRect();
    const x = this.x(t);
    if (x < GUTTER || x > this.w) return null;
    return { x: rect.left + x, y: rect.top + r * this.rowH - top + 1 + sg.lane * lh + lh / 2 };
  }

  rowCount() { return this.rows.length; }

  // drawnRows is how many rows the last paint drew (virtualisation).
  drawnRows() {
    const top = this.body.scrollTop;
    return Math.min(this.rows.length, Math.ceil((top + this.h) / this.rowH)) - Math.max(0, Math.floor(top / this.rowH));
  }
}

// legend builds the kinds' legend.
// present, when given, keeps the kinds some segment uses (by index), and
// 'other' whether another user's job shows.
export function legend(kinds, present) {
  const shown = present ? kinds.filter((k, i) => present.has(i)) : kinds;
  return el('div', { class: 'legend' }, shown.map((k) => el('span', { class: 'legend-item', title: k.doc },
    el('span', { class: `swatch style-${k.style}`, style: `background:${k.color}` }), k.label)),
  !present || present.has('other') ? el('span', { class: 'legend-item', title: "another user's job (you see that the GPU is busy, not whose job it is)" },
    el('span', { class: 'swatch style-hatch', style: 'background:#3b4452' }), 'other user') : null);
}

// kindsIn returns the kind indexes used in d (GPU rows and lanes), and
// 'other' when d holds another user's segment.
export function kindsIn(d) {
  const set = new Set();
  for (const row of d.gpus || []) for (const s of row) { set.add(s[1]); if (s[0] < 0) set.add('other'); }
  for (const j of d.jobs || []) for (const s of j.lane || []) set.add(s[1]);
  return set;
}
