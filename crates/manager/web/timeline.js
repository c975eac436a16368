// The timeline, drawn on a canvas: packets per interval as bars, bytes as a line, the
// selected window shaded. Drawn by hand (about 200 lines) rather than with a plotting
// library: two series over one time axis is all it shows (docs/web.md says why).

import { localTime, count, bytes as fmtBytes } from './api.js';

const M = { left: 64, right: 72, top: 12, bottom: 26 };

/** A nice step near `raw` (1, 2 or 5 times a power of ten). */
function niceStep(raw) {
  const p = Math.pow(10, Math.floor(Math.log10(raw)));
  const f = raw / p;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
}

/** Time ticks over `from..to` (ms): steps a person reads (seconds to days). */
function timeTicks(from, to, n) {
  const steps = [1e3, 2e3, 5e3, 1e4, 15e3, 3e4, 6e4, 12e4, 3e5, 6e5, 9e5, 18e5, 36e5,
    72e5, 108e5, 216e5, 432e5, 864e5, 1728e5, 6048e5];
  const want = (to - from) / n;
  const step = steps.find((s) => s >= want) || steps[steps.length - 1];
  const zone = new Date(from).getTimezoneOffset() * 6e4;
  const out = [];
  for (let t = Math.ceil((from - zone) / step) * step + zone; t <= to; t += step) out.push(t);
  return { ticks: out, step };
}

function tickLabel(t, step) {
  const s = localTime(t * 1e6, false);
  if (step >= 864e5) return s.slice(0, 10);
  if (step >= 6e4) return s.slice(5, 16);
  return s.slice(11);
}

export class Timeline {
  /**
   * `onView(from, to)`: the user zoomed or panned (ms; null, null: the whole reach).
   * `onSelect(from, to)`: the user selected a window (ms), or cleared it (null).
   */
  constructor(canvas, onView, onSelect) {
    this.canvas = canvas;
    this.onView = onView;
    this.onSelect = onSelect;
    this.data = null;
    this.sel = null;
    this.drag = null;
    new ResizeObserver(() => this.draw()).observe(canvas);
    canvas.addEventListener('mousedown', (e) => this.down(e));
    window.addEventListener('mousemove', (e) => this.move(e));
    window.addEventListener('mouseup', (e) => this.up(e));
    canvas.addEventListener('dblclick', () => this.zoomIn());
    canvas.addEventListener('keydown', (e) => this.key(e));
  }

  /** The answer of GET /timeline. */
  set(data) {
    this.data = {
      from: data.from_ns / 1e6,
      to: data.to_ns / 1e6,
      step: data.step_ns / 1e6,
      packets: data.packets,
      bytes: data.bytes,
    };
    this.draw();
  }

  /** The window shown (ms). */
  view() {
    return this.data ? [this.data.from, this.data.to] : [0, 0];
  }

  plot() {
    const r = this.canvas.getBoundingClientRect();
    return { x: M.left, y: M.top, w: Math.max(10, r.width - M.left - M.right), h: Math.max(10, r.height - M.top - M.bottom), cw: r.width, ch: r.height };
  }

  xOf(t) {
    const p = this.plot();
    const [a, b] = this.view();
    return p.x + ((t - a) / (b - a || 1)) * p.w;
  }

  tOf(x) {
    const p = this.plot();
    const [a, b] = this.view();
    return a + Math.min(1, Math.max(0, (x - p.x) / p.w)) * (b - a);
  }

  draw() {
    const c = this.canvas;
    const dpr = window.devicePixelRatio || 1;
    const p = this.plot();
    c.width = Math.round(p.cw * dpr);
    c.height = Math.round(p.ch * dpr);
    const g = c.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    const css = getComputedStyle(document.documentElement);
    const color = (v) => css.getPropertyValue(v).trim();
    g.clearRect(0, 0, p.cw, p.ch);
    g.font = '11px system-ui, sans-serif';
    g.fillStyle = color('--muted');
    if (!this.data || this.data.packets.length === 0) {
      g.fillText('No recorded packets yet.', p.x + 8, p.y + 20);
      return;
    }
    const d = this.data;
    const maxP = Math.max(1, ...d.packets);
    const maxB = Math.max(1, ...d.bytes);
    const pStep = niceStep(maxP / 4);
    const bStep = niceStep(maxB / 4);
    const topP = Math.ceil(maxP / pStep) * pStep;
    const topB = Math.ceil(maxB / bStep) * bStep;
    // Grid and the packets' axis (left), the bytes' axis (right).
    g.strokeStyle = color('--line');
    g.lineWidth = 1;
    g.textAlign = 'right';
    g.textBaseline = 'middle';
    for (let v = 0; v <= topP + 1e-9; v += pStep) {
      const y = p.y + p.h - (v / topP) * p.h;
      g.beginPath();
      g.moveTo(p.x, y + 0.5);
      g.lineTo(p.x + p.w, y + 0.5);
      g.stroke();
      g.fillText(count(v), p.x - 6, y);
    }
    g.textAlign = 'left';
    g.fillStyle = color('--bytes');
    for (let v = 0; v <= topB + 1e-9; v += bStep) {
      g.fillText(fmtBytes(v), p.x + p.w + 6, p.y + p.h - (v / topB) * p.h);
    }
    // Packets: one bar per bucket.
    const bw = p.w / d.packets.length;
    g.fillStyle = color('--bars');
    d.packets.forEach((v, i) => {
      if (v <= 0) return;
      const h = Math.max(1, (v / topP) * p.h);
      g.fillRect(p.x + i * bw, p.y + p.h - h, Math.max(1, bw - (bw > 3 ? 1 : 0)), h);
    });
    // Bytes: a line through the buckets' middles.
    g.strokeStyle = color('--bytes');
    g.lineWidth = 1.5;
    g.beginPath();
    d.bytes.forEach((v, i) => {
      const x = p.x + (i + 0.5) * bw;
      const y = p.y + p.h - (v / topB) * p.h;
      if (i === 0) g.moveTo(x, y);
      else g.lineTo(x, y);
    });
    g.stroke();
    // Time axis.
    const { ticks, step } = timeTicks(d.from, d.to, Math.max(2, Math.floor(p.w / 110)));
    g.fillStyle = color('--muted');
    g.textAlign = 'center';
    g.textBaseline = 'top';
    for (const t of ticks) {
      const x = this.xOf(t);
      g.fillRect(x, p.y + p.h, 1, 4);
      g.fillText(tickLabel(t, step), x, p.y + p.h + 7);
    }
    // The selection.
    if (this.sel) {
      const a = this.xOf(this.sel[0]);
      const b = this.xOf(this.sel[1]);
      g.fillStyle = color('--sel');
      g.fillRect(Math.min(a, b), p.y, Math.abs(b - a), p.h);
    }
  }

  down(e) {
    if (!this.data || e.button !== 0) return;
    const r = this.canvas.getBoundingClientRect();
    this.drag = { x: e.clientX - r.left };
    this.canvas.focus();
  }

  move(e) {
    if (!this.drag) return;
    const r = this.canvas.getBoundingClientRect();
    const x = e.clientX - r.left;
    const [a, b] = [this.tOf(this.drag.x), this.tOf(x)].sort((u, v) => u - v);
    this.sel = [a, b];
    this.draw();
  }

  up(e) {
    if (!this.drag) return;
    const r = this.canvas.getBoundingClientRect();
    const moved = Math.abs(e.clientX - r.left - this.drag.x);
    this.drag = null;
    if (moved < 3) this.sel = null;
    this.draw();
    this.onSelect(this.sel ? this.sel[0] : null, this.sel ? this.sel[1] : null);
  }

  /** Shows the selection (or the middle half), at least a millisecond wide. */
  zoomIn() {
    const [a, b] = this.sel || (() => { const [x, y] = this.view(); const q = (y - x) / 4; return [x + q, y - q]; })();
    const mid = (a + b) / 2;
    const half = Math.max(0.5, (b - a) / 2);
    this.sel = null;
    this.onSelect(null, null);
    this.onView(mid - half, mid + half);
  }

  zoomOut() {
    const [a, b] = this.view();
    const w = b - a;
    this.onView(a - w / 2, b + w / 2);
  }

  pan(share) {
    const [a, b] = this.view();
    const d = (b - a) * share;
    this.onView(a + d, b + d);
  }

  key(e) {
    const acts = {
      ArrowLeft: () => this.pan(-0.25),
      ArrowRight: () => this.pan(0.25),
      '+': () => this.zoomIn(),
      '=': () => this.zoomIn(),
      Enter: () => this.zoomIn(),
      '-': () => this.zoomOut(),
      0: () => this.onView(null, null),
      Escape: () => { this.sel = null; this.draw(); this.onSelect(null, null); },
    };
    const f = acts[e.key];
    if (f) {
      e.preventDefault();
      f();
    }
  }
}
