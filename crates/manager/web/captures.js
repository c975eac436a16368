// The Captures screen: the on-demand captures (state, packets, drops, time to the first
// packet), a form to start one, and for each a stop button and its download.

import { call, el, count, showError } from './api.js';

let timer = null;
let form = null;

export function init() {
  form = document.getElementById('capture-form');
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    showError(form, '');
    const f = form.elements;
    const body = { interface: f.interface.value.trim() };
    if (f.filter.value.trim()) body.filter = f.filter.value.trim();
    if (f.count.value.trim()) body.count = Number(f.count.value);
    if (f.duration.value.trim()) body.duration = Number(f.duration.value);
    if (f.since.value.trim()) body.since = f.since.value.trim();
    if ((body.count !== undefined && !Number.isInteger(body.count)) || Number.isNaN(body.duration)) {
      showError(form, 'count is a whole number of packets, duration a number of seconds');
      return;
    }
    if (body.filter) {
      const check = await call('GET', '/filter?' + new URLSearchParams({ expr: body.filter }));
      if (check.error) {
        showError(form, check.error);
        return;
      }
    }
    try {
      await call('POST', '/captures', body);
      await load();
    } catch (e) {
      showError(form, e.message);
    }
  });
}

export function enter() {
  load();
  timer = setInterval(load, 2000);
}

export function leave() {
  clearInterval(timer);
  timer = null;
}

function drops(d) {
  const total = (d.kernel || 0) + (d.stage_full || 0) + (d.app || 0) + (d.disk || 0);
  const parts = Object.entries(d).filter(([, v]) => v).map(([k, v]) => `${k} ${count(v)}`);
  return el('td', { class: 'num', title: parts.join(', ') || 'none' }, count(total));
}

async function stop(id) {
  try {
    await call('DELETE', `/captures/${encodeURIComponent(id)}`);
  } catch (e) {
    showError(form, e.message);
  }
  await load();
}

let loading = false;

/** Reads the captures, unless a read is still under way. */
async function load() {
  if (loading) return;
  loading = true;
  try {
    await loadOnce();
  } finally {
    loading = false;
  }
}

async function loadOnce() {
  let list;
  try {
    list = await call('GET', '/captures');
  } catch (e) {
    showError(form, e.message);
    return;
  }
  const rows = list.slice().reverse().map((c) => {
    const running = c.state === 'running';
    const lag = c.first_packet_us !== undefined ? `${(c.first_packet_us / 1000).toFixed(2)} ms` : '–';
    const actions = el('td', {},
      running && !c.earlier_run ? el('button', { type: 'button', 'data-testid': 'capture-stop', onclick: () => stop(c.id) }, 'Stop') : '',
      ' ',
      c.packets > 0 ? el('a', { class: 'button', href: `/captures/${encodeURIComponent(c.id)}/pcap`, download: `${c.id}.pcapng`, 'data-testid': 'download-pcap' }, 'Download') : '');
    return el('tr', { 'data-testid': 'capture-row', 'data-id': c.id, 'data-state': c.state },
      el('td', {}, c.id), el('td', {}, c.state + (c.reason && !c.reason.startsWith(c.state) ? ` (${c.reason})` : '')),
      el('td', {}, c.interface), el('td', {}, c.filter || ''),
      el('td', { class: 'num' }, count(c.packets)), drops(c.drops), el('td', { class: 'num' }, lag),
      el('td', {}, c.path ? c.path.split('/').pop() : ''), actions);
  });
  document.querySelector('#capture-list tbody').replaceChildren(...rows);
}
