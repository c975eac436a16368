// The Recording screen: reach, disk against the budget, drops by place and what the
// recording left out, and the timeline, refreshed every few seconds while shown.

import { call, query, el, localTime, count, bytes, duration } from './api.js';
import { Timeline } from './timeline.js';
import { useWindow } from './search.js';

let timeline = null;
let view = null; // [from, to] in ms; null: the whole reach (follows the recording live)
let selected = null;
let timer = null;
let nav = null;

export function init(ctx) {
  nav = ctx;
  const canvas = document.getElementById('timeline');
  timeline = new Timeline(
    canvas,
    (a, b) => {
      view = a === null ? null : [a, b];
      load();
    },
    (a, b) => {
      selected = a === null ? null : [a, b];
      document.getElementById('tl-search').disabled = !selected;
    },
  );
  document.getElementById('tl-in').addEventListener('click', () => timeline.zoomIn());
  document.getElementById('tl-out').addEventListener('click', () => timeline.zoomOut());
  document.getElementById('tl-all').addEventListener('click', () => {
    view = null;
    load();
  });
  const go = document.getElementById('tl-search');
  go.disabled = true;
  go.addEventListener('click', () => {
    if (!selected) return;
    useWindow(selected[0], selected[1]);
    nav.go('search');
  });
}

export function enter() {
  load();
  timer = setInterval(load, 5000);
}

export function leave() {
  clearInterval(timer);
  timer = null;
}

function fact(label, value, extra) {
  return el('div', { class: 'fact' }, el('span', { class: 'muted small' }, label), el('b', {}, value), ...(extra ? [extra] : []));
}

function facts(r) {
  const box = document.getElementById('rec-facts');
  const reach = r.oldest_ns && r.newest_ns ? duration(r.newest_ns - r.oldest_ns) : '–';
  const used = (r.record_bytes || 0) + (r.spool_bytes || 0);
  let meter = null;
  if (r.budget) {
    const share = Math.min(100, (100 * used) / r.budget);
    meter = el('div', { class: 'meter', title: `${share.toFixed(1)}% of the budget` }, el('span', { style: `width:${share}%` }));
  }
  const packets = r.bases.reduce((s, b) => s + ((b.recording && b.recording.packets) || 0), 0);
  box.replaceChildren(
    fact('Oldest packet', r.oldest_ns ? localTime(r.oldest_ns, false) : '–'),
    fact('Newest packet', r.newest_ns ? localTime(r.newest_ns, false) : '–'),
    fact('Reach', reach),
    fact('Disk used' + (r.budget ? ` of ${bytes(r.budget)}` : ' (no budget)'), bytes(used), meter),
    fact('Recorded by this run', `${count(packets)} packets`),
    fact('Files', count(r.files)),
  );
  if (!r.record) box.append(fact('Recording', 'off (serve --record DIR)'));
  drops(r.bases);
  const list = document.getElementById('interfaces');
  list.replaceChildren(...r.bases.map((b) => el('option', { value: b.interface })));
}

/** A count in a cell, `title` on hover. */
function num(v, title) {
  return el('td', { class: 'num', title }, count(v || 0));
}

/** The cut packets, their bytes and the cutoff's early evictions on hover. */
function cut(rec) {
  let title = `${bytes(rec.cut_bytes || 0)} cut`;
  if (rec.cut_evictions) title += `; ${count(rec.cut_evictions)} connections forgotten before they were idle (--cutoff-flows)`;
  return num(rec.cut_packets, title);
}

/** Each base's packets, its drops by place, what the cutoff and the session tables left
 * out, and the packets out of time order (a column only when some base has any). */
function drops(bases) {
  const order = bases.some((b) => b.recording && b.recording.out_of_order);
  document.getElementById('drops-order').hidden = !order;
  const rows = bases.map((b) => {
    const rec = b.recording || {};
    const d = rec.drops || {};
    const cells = [num(b.packets), num(d.kernel ?? b.kernel_drops), num(d.stage_full), num(d.app), num(d.disk), cut(rec), num(rec.sessions_dropped)];
    if (order) cells.push(num(rec.out_of_order));
    return el('tr', {}, el('td', {}, b.interface), ...cells);
  });
  document.querySelector('#drops tbody').replaceChildren(...rows);
}

let loading = false;
let again = false;

/** Reads the recording's figures and its timeline; once more after a read under way. */
async function load() {
  if (loading) {
    again = true;
    return;
  }
  loading = true;
  try {
    do {
      again = false;
      await loadOnce();
    } while (again);
  } finally {
    loading = false;
  }
}

async function loadOnce() {
  const canvas = document.getElementById('timeline');
  const buckets = Math.max(20, Math.min(1000, Math.floor(canvas.clientWidth / 5)));
  const q = { buckets };
  if (view) {
    q.from = (view[0] / 1000).toFixed(3);
    q.to = (view[1] / 1000).toFixed(3);
  }
  try {
    performance.mark('corecap:timeline');
    const [r, t] = await Promise.all([call('GET', '/recording'), call('GET', '/timeline?' + query(q))]);
    facts(r);
    timeline.set(t);
    performance.mark('corecap:timeline-drawn');
    const label = t.packets.length ? `${localTime(t.from_ns, false)} – ${localTime(t.to_ns, false)}, ${duration(t.step_ns)} a bar` : '';
    document.getElementById('tl-window').textContent = label;
  } catch (e) {
    document.getElementById('tl-window').textContent = e.message;
  }
}
