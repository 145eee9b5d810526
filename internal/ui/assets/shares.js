// The users' shares over time (timeline.Shares) as an SVG line chart:
// a solid line per user for the share of the cluster it held, a dashed one
// of the same colour for what its tickets entitle it to.
import { el, fmtDur, fmtTick, fmtTime, registerUsers, userColor } from './timeline.js';

const NS = 'http://www.w3.org/2000/svg';
function svg(tag, attrs, ...children) {
  const e = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v !== undefined && v !== null) e.setAttribute(k, v);
  for (const c of children.flat()) if (c) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

const MAX_SERIES = 8;

// sharesChart draws shares into host (replacing its content).
export function sharesChart(host, shares, opts = {}) {
  host.replaceChildren();
  const epoch = opts.epoch || 0;
  const n = (shares.times || []).length;
  if (!n || !(shares.users || []).length) {
    host.append(el('div', { class: 'muted pad', text: 'No GPU time recorded yet.' }));
    return;
  }
  // the users with the most GPU time; the rest summed
  const total = (u) => u.held.reduce((a, b) => a + b, 0);
  let users = [...shares.users].sort((a, b) => total(b) - total(a) || a.user.localeCompare(b.user));
  if (users.length > MAX_SERIES) {
    const keep = users.slice(0, MAX_SERIES - 1), rest = users.slice(MAX_SERIES - 1);
    const sum = (f) => Array.from({ length: n }, (_, k) => rest.reduce((a, u) => a + ((u[f] || [])[k] || 0), 0));
    keep.push({ user: `${rest.length} more`, held: sum('held'), share: sum('share'), entitled: rest[0].entitled ? sum('entitled') : null, more: true });
    users = keep;
  }
  registerUsers(shares.users.map((u) => u.user).filter(Boolean));
  // a fixed coordinate system scaled to the container's width (reading
  // the container's width here would force a layout of the whole page)
  const W = opts.width || 640, H = opts.height || 230;
  const m = { l: 44, r: 12, t: 10, b: 26 };
  const t0 = opts.t0 !== undefined ? opts.t0 : shares.times[0], t1 = opts.t1 !== undefined ? opts.t1 : shares.to;
  let ymax = 0;
  for (const u of users) for (let k = 0; k < n; k++) ymax = Math.max(ymax, u.share[k], u.entitled ? u.entitled[k] : 0);
  ymax = [0.25, 0.5, 0.75, 1].find((v) => v >= ymax - 1e-9) || 1;
  const X = (t) => m.l + (t - t0) / Math.max(1e-9, t1 - t0) * (W - m.l - m.r);
  const Y = (v) => H - m.b - v / ymax * (H - m.t - m.b);
  const root = svg('svg', { class: 'chart', viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: 'xMidYMid meet', role: 'img', 'aria-label': 'share of the cluster per user over time' });
  const tick = ymax <= 0.25 ? 0.05 : ymax <= 0.5 ? 0.1 : 0.25;
  for (let v = 0; v <= ymax + 1e-9; v += tick) {
    const y = Y(v);
    root.append(svg('line', { x1: m.l, x2: W - m.r, y1: y, y2: y, class: 'grid' }), svg('text', { x: m.l - 6, y: y + 4, class: 'tick', 'text-anchor': 'end' }, Math.round(v * 100) + '%'));
  }
  for (let i = 0; i <= 4; i++) {
    const t = t0 + (t1 - t0) * i / 4;
    root.append(svg('text', { x: X(t), y: H - 8, class: 'tick', 'text-anchor': i === 0 ? 'start' : i === 4 ? 'end' : 'middle' }, epoch > 0 ? fmtTime(t, epoch) : fmtTick(Math.round(t / 60) * 60, 60)));
  }
  const mid = (k) => shares.times[k] + Math.min(shares.window, t1 - shares.times[k]) / 2;
  const path = (vals) => vals.map((v, k) => `${k ? 'L' : 'M'}${X(mid(k)).toFixed(1)},${Y(v).toFixed(1)}`).join('');
  for (const u of users) {
    const col = u.user === '' ? '#6b7785' : u.more ? '#9aa4b1' : userColor(u.user);
    if (u.entitled) root.append(svg('path', { d: path(u.entitled), class: 'entitled', stroke: col }));
    root.append(svg('path', { d: path(u.share), class: 'held', stroke: col, 'data-user': u.user }));
  }
  const cursor = svg('line', { class: 'cursor', y1: m.t, y2: H - m.b, x1: -10, x2: -10 });
  root.append(cursor);
  const tip = el('div', { class: 'chart-tip', hidden: true });
  root.addEventListener('pointermove', (e) => {
    const r = root.getBoundingClientRect();
    const x = (e.clientX - r.left) * W / r.width;
    const t = t0 + (x - m.l) / (W - m.l - m.r) * (t1 - t0);
    const k = Math.max(0, Math.min(n - 1, Math.floor((t - t0) / shares.window)));
    cursor.setAttribute('x1', X(mid(k))); cursor.setAttribute('x2', X(mid(k)));
    tip.replaceChildren(el('div', { class: 'tip-title', text: `${epoch > 0 ? fmtTime(shares.times[k], epoch) : fmtDur(shares.times[k])} + ${fmtDur(shares.window)}` }),
      ...users.map((u) => el('div', {}, el('span', { class: 'swatch', style: `background:${u.user === '' ? '#6b7785' : u.more ? '#9aa4b1' : userColor(u.user)}` }),
        `${u.user || 'other users'}: ${(u.share[k] * 100).toFixed(1)}%` + (u.entitled ? ` of ${(u.entitled[k] * 100).toFixed(1)}% entitled` : ''))));
    tip.hidden = false;
    const px = e.clientX - r.left;
    tip.style.left = Math.min(px + 12, r.width - 230) + 'px';
    tip.style.top = '8px';
  });
  root.addEventListener('pointerleave', () => { tip.hidden = true; cursor.setAttribute('x1', -10); cursor.setAttribute('x2', -10); });
  const avg = (v) => v ? v.reduce((a, b) => a + b, 0) / n : null;
  const leg = el('div', { class: 'legend' }, users.map((u) => el('span', { class: 'legend-item' },
    el('span', { class: 'swatch', style: `background:${u.user === '' ? '#6b7785' : u.more ? '#9aa4b1' : userColor(u.user)}` }),
    `${u.user || 'other users'} ${(avg(u.share) * 100).toFixed(0)}%` + (u.entitled ? ` / ${(avg(u.entitled) * 100).toFixed(0)}%` : ''))),
  shares.users.some((u) => u.entitled) ? el('span', { class: 'legend-item muted', text: 'solid: held · dashed: entitled (tickets among active users)' }) : null);
  host.append(el('div', { class: 'chart-wrap' }, root, tip), leg);
}
