// The Sensors screen: this sensor and the peers of `serve --peers`, each asked for its
// recording's figures (reach, disk, packets, drops) or why it did not answer.

import { call, el, localTime, count, bytes } from './api.js';

let timer = null;

/** The names of the peers (not this sensor), once asked. */
export async function peers() {
  const s = await call('GET', '/sensors');
  return s.sensors.filter((x) => x.name !== 'local').map((x) => x.name);
}

export function init() {}

export function enter() {
  load();
  timer = setInterval(load, 10000);
}

export function leave() {
  clearInterval(timer);
  timer = null;
}

async function load() {
  const s = await call('GET', '/sensors');
  const rows = s.sensors.map((x) => {
    const r = x.recording || {};
    const bases = r.bases || [];
    const packets = bases.reduce((n, b) => n + (b.packets || 0), 0);
    const drops = bases.reduce((n, b) => {
      const d = (b.recording && b.recording.drops) || {};
      return n + (d.kernel ?? b.kernel_drops ?? 0) + (d.stage_full || 0) + (d.app || 0) + (d.disk || 0);
    }, 0);
    const status = x.ok ? 'answers' : `no answer: ${x.error}`;
    return el('tr', { 'data-testid': 'sensor-row', 'data-name': x.name, 'data-ok': String(x.ok) },
      el('td', {}, x.name === 'local' ? 'this sensor' : x.name), el('td', {}, x.url || ''),
      el('td', { class: x.ok ? '' : 'error' }, status),
      el('td', {}, r.oldest_ns ? localTime(r.oldest_ns, false) : '–'),
      el('td', {}, r.newest_ns ? localTime(r.newest_ns, false) : '–'),
      el('td', { class: 'num' }, x.ok ? bytes((r.record_bytes || 0) + (r.spool_bytes || 0)) : '–'),
      el('td', { class: 'num' }, x.ok ? count(packets) : '–'),
      el('td', { class: 'num' }, x.ok ? count(drops) : '–'));
  });
  document.querySelector('#sensor-list tbody').replaceChildren(...rows);
}
