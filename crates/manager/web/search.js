// The Search screen: a window and a filter or session fields give the sessions (read as
// they stream in, sorted and paged here: only one page is ever in the document); a
// session gives its packets (paged by the daemon), a packet its bytes.

import { call, query, el, localTime, apiTime, count, bytes, duration, showError, ApiError } from './api.js';

const PAGE = 50;
const PACKETS = 100;

let form = null;
let sessions = [];
let sort = { key: 'start', dir: 1 };
let page = 0;
let running = null; // the AbortController of the search in flight
let open = null; // { flow, offset, total, q }

const COLUMNS = [
  ['start', 'start', (f) => f.corecap.first_ns],
  ['source', 'source', (f) => f.source.ip],
  ['sport', 'port', (f) => f.source.port ?? -1],
  ['destination', 'destination', (f) => f.destination.ip],
  ['dport', 'port', (f) => f.destination.port ?? -1],
  ['proto', 'protocol', (f) => f.network.transport],
  ['packets', 'packets', (f) => f.network.packets],
  ['bytes', 'bytes', (f) => f.network.bytes],
  ['duration', 'duration', (f) => f.event.duration],
  ['name', 'name', (f) => nameOf(f)],
  ['sensor', 'sensor', (f) => f._sensor],
];

function nameOf(f) {
  return (f.tls && f.tls.client.server_name) || (f.url && f.url.domain) || (f.dns && f.dns.question.name) || '';
}

/** Puts a window (ms) in the form, in this browser's zone. */
export function useWindow(a, b) {
  form.from.value = localTime(a * 1e6);
  form.to.value = localTime(b * 1e6);
}

let peers = [];

export function init(ctx) {
  peers = ctx.peers || [];
  form = document.getElementById('search-form');
  for (const l of form.querySelectorAll('.peers')) l.hidden = peers.length === 0;
  const select = document.getElementById('search-sensor');
  for (const p of peers) select.append(el('option', { value: p }, p));
  document.getElementById('zone').textContent = Intl.DateTimeFormat().resolvedOptions().timeZone;
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    run();
  });
  document.getElementById('search-cancel').addEventListener('click', () => running && running.abort());
  const head = el('tr', {}, ...COLUMNS.map(([key, label]) => el('th', {}, el('button', { type: 'button', onclick: () => sortBy(key) }, label))));
  document.querySelector('#sessions thead').replaceChildren(head);
}

export function enter() {
  form.filter.focus();
}

export function leave() {}

/** The search's fields as the API takes them: host and port join the filter. */
function fields() {
  const f = form.elements;
  const parts = [];
  if (f.filter.value.trim()) parts.push(`(${f.filter.value.trim()})`);
  if (f.host.value.trim()) parts.push(`host ${f.host.value.trim()}`);
  if (f.port.value.trim()) parts.push(`port ${f.port.value.trim()}`);
  return {
    from: apiTime(f.from.value),
    to: apiTime(f.to.value),
    filter: parts.join(' and '),
    community_id: f.community_id.value,
    sni: f.sni.value,
    dns: f.dns.value,
    http_host: f.http_host.value,
  };
}

function progress(text) {
  document.getElementById('search-progress').textContent = text;
}

async function run() {
  if (running) running.abort();
  // Marks for the page's benchmark (bench/page_times.py): search, first row, whole list.
  performance.clearMarks();
  performance.mark('corecap:search');
  showError(form, '');
  const q = fields();
  const check = await call('GET', '/filter?' + query({ expr: q.filter }));
  if (check.error) {
    showError(form, check.error);
    return;
  }
  const ctl = new AbortController();
  running = ctl;
  const sel = form.elements.sensor.value;
  const targets = sel === '*' ? ['local', ...peers] : [sel || 'local'];
  sessions = [];
  page = 0;
  closeSession();
  document.getElementById('search-cancel').disabled = false;
  document.getElementById('search-download').hidden = true;
  progress('searching…');
  const t0 = performance.now();
  try {
    // Peers that do not answer now are not asked: their failure is known already.
    const down = new Map();
    if (targets.some((t) => t !== 'local')) {
      const s = await call('GET', '/sensors', undefined, ctl.signal);
      for (const x of s.sensors) if (!x.ok) down.set(x.name, x.error);
    }
    const ask = (t) => {
      if (down.has(t)) return Promise.reject(new Error(`no answer: ${down.get(t)}`));
      return stream('/flows?' + query({ ...q, limit: 100000, sensor: t === 'local' ? '' : t }), ctl.signal, t);
    };
    const got = await Promise.allSettled(targets.map(ask));
    if (ctl.signal.aborted) throw new DOMException('cancelled', 'AbortError');
    const ms = Math.round(performance.now() - t0);
    const failed = [];
    const notes = [];
    const said = got.map((g, i) => {
      if (g.status === 'rejected') {
        failed.push(`${targets[i]}: ${g.reason.message}`);
        return null;
      }
      const n = sessions.filter((f) => f._sensor === targets[i]).length;
      const end = g.value;
      let text = `${targets.length > 1 ? targets[i] + ': ' : ''}${count(n)} session${n === 1 ? '' : 's'}`;
      if (end.truncated) text += ` (the first ${count(n)}: narrow the search)`;
      notes.push(...(end.notes || []));
      return text;
    });
    if (failed.length && (targets.length === 1 || !form.elements.partial.checked)) {
      sessions = [];
      const more = targets.length > 1 ? '\nThe answer would be partial: tick "accept a partial answer" to see the others.' : '';
      throw new Error(failed.join('\n') + more);
    }
    const partial = failed.length ? ` — partial: ${failed.join('; ')}` : '';
    progress(`${said.filter((x) => x).join('; ')} in ${ms} ms${partial}${notes.length ? ' — ' + notes.join('; ') : ''}`);
    const dl = document.getElementById('search-download');
    dl.href = '/queries?' + query({ ...q, sensor: targets[0] === 'local' ? '' : targets[0] });
    dl.hidden = targets.length > 1;
  } catch (e) {
    if (e.name === 'AbortError') progress(`cancelled after ${count(sessions.length)} sessions`);
    else {
      progress('');
      showError(form, e.message);
    }
  } finally {
    if (running === ctl) running = null;
    document.getElementById('search-cancel').disabled = true;
    render();
    performance.mark('corecap:all-rows');
  }
}

/** Reads GET /flows line by line into the sessions, each named by its sensor; returns
 * the end line. */
async function stream(url, signal, sensor) {
  const r = await fetch(url, { signal, credentials: 'same-origin' });
  if (!r.ok) {
    const j = await r.json().catch(() => null);
    throw new ApiError(r.status, (j && j.error) || r.statusText);
  }
  const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  let end = null;
  let shown = false;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += value;
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      if (!line.trim()) continue;
      const o = JSON.parse(line);
      if (o.type === 'end') end = o;
      else {
        o._sensor = sensor;
        sessions.push(o);
      }
    }
    progress(`${count(sessions.length)} sessions…`);
    if (!shown && sessions.length) {
      shown = true;
      render();
      performance.mark('corecap:first-row');
    }
  }
  if (!end) throw new Error('the answer was cut short: try again');
  return end;
}

function sortBy(key) {
  sort = { key, dir: sort.key === key ? -sort.dir : 1 };
  page = 0;
  render();
}

function sorted() {
  const get = COLUMNS.find((c) => c[0] === sort.key)[2];
  return [...sessions].sort((a, b) => {
    const x = get(a);
    const y = get(b);
    return (x < y ? -1 : x > y ? 1 : 0) * sort.dir;
  });
}

function pager(box, at, size, total, go) {
  const last = Math.max(0, Math.ceil(total / size) - 1);
  box.replaceChildren(
    el('button', { type: 'button', disabled: at === 0, onclick: () => go(at - 1) }, '‹ Previous'),
    el('span', { class: 'muted' }, total ? `${count(at * size + 1)}–${count(Math.min(total, (at + 1) * size))} of ${count(total)}` : 'none'),
    el('button', { type: 'button', disabled: at >= last, onclick: () => go(at + 1) }, 'Next ›'),
  );
}

function render() {
  document.getElementById('sessions-card').hidden = false;
  const list = sorted();
  const rows = list.slice(page * PAGE, (page + 1) * PAGE).map((f) => {
    const tr = el('tr', { tabindex: 0, 'data-testid': 'session-row' },
      el('td', {}, localTime(f.corecap.first_ns)),
      el('td', {}, f.source.ip), el('td', { class: 'num' }, f.source.port ?? ''),
      el('td', {}, f.destination.ip), el('td', { class: 'num' }, f.destination.port ?? ''),
      el('td', {}, f.network.transport),
      el('td', { class: 'num' }, count(f.network.packets)),
      el('td', { class: 'num' }, bytes(f.network.bytes)),
      el('td', { class: 'num' }, duration(f.event.duration)),
      el('td', {}, nameOf(f)),
      el('td', {}, f._sensor === 'local' ? 'this sensor' : f._sensor));
    const pick = () => {
      for (const r of document.querySelectorAll('#sessions tbody tr')) r.removeAttribute('aria-selected');
      tr.setAttribute('aria-selected', 'true');
      openSession(f);
    };
    tr.addEventListener('click', pick);
    tr.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' || e.key === ' ') {
        e.preventDefault();
        pick();
      }
    });
    return tr;
  });
  document.querySelector('#sessions tbody').replaceChildren(...rows);
  pager(document.getElementById('sessions-pager'), page, PAGE, list.length, (p) => {
    page = p;
    render();
  });
}

function closeSession() {
  open = null;
  document.getElementById('packets-card').hidden = true;
  document.getElementById('packet-bytes').hidden = true;
}

/** The query of one session: its Community ID, within the whole seconds it spans. */
function sessionQuery(f) {
  return {
    community_id: f.network.community_id,
    from: String(Math.floor(f.corecap.first_ns / 1e9)),
    to: String(Math.floor(f.corecap.last_ns / 1e9) + 1),
    sensor: f._sensor === 'local' ? '' : f._sensor,
  };
}

async function openSession(f) {
  open = { flow: f, offset: 0, total: 0, q: sessionQuery(f) };
  const card = document.getElementById('packets-card');
  card.hidden = false;
  document.getElementById('packets-title').textContent =
    `Packets of ${f.source.ip}:${f.source.port ?? ''} → ${f.destination.ip}:${f.destination.port ?? ''} (${f.network.transport})`;
  document.getElementById('session-download').href = '/queries?' + query(open.q);
  await loadPackets(0);
}

async function loadPackets(offset) {
  const o = open;
  document.getElementById('packet-bytes').hidden = true;
  let p;
  try {
    p = await call('GET', '/packets?' + query({ ...o.q, offset, limit: PACKETS }));
  } catch (e) {
    document.getElementById('packets-title').textContent = e.message;
    return;
  }
  if (open !== o) return;
  o.offset = offset;
  o.total = p.total;
  const rows = p.rows.map((r) => {
    const tr = el('tr', { tabindex: 0, 'data-testid': 'packet-row' },
      el('td', { class: 'num' }, r.n + 1), el('td', {}, localTime(r.ts_ns)),
      el('td', {}, r.src), el('td', {}, r.dst), el('td', {}, r.proto),
      el('td', { class: 'num' }, r.len), el('td', { class: 'summary' }, r.summary));
    const pick = () => showBytes(o, r.n);
    tr.addEventListener('click', pick);
    tr.addEventListener('keydown', (e) => {
      if (e.key === 'Enter') pick();
    });
    return tr;
  });
  document.querySelector('#packets tbody').replaceChildren(...rows);
  pager(document.getElementById('packets-pager'), offset / PACKETS, PACKETS, p.total, (n) => loadPackets(n * PACKETS));
}

/** Hex and ASCII, 16 bytes a line, as tcpdump -X prints them. */
function dump(hex) {
  const b = hex.match(/../g) || [];
  const lines = [];
  for (let i = 0; i < b.length; i += 16) {
    const row = b.slice(i, i + 16);
    const words = [];
    for (let j = 0; j < row.length; j += 2) words.push(row.slice(j, j + 2).join(''));
    const ascii = row.map((h) => {
      const c = parseInt(h, 16);
      return c >= 0x20 && c < 0x7f ? String.fromCharCode(c) : '.';
    }).join('');
    lines.push(`0x${i.toString(16).padStart(4, '0')}:  ${words.join(' ').padEnd(39)}  ${ascii}`);
  }
  return lines.join('\n');
}

async function showBytes(o, n) {
  const pre = document.getElementById('packet-bytes');
  try {
    const p = await call('GET', '/packets?' + query({ ...o.q, offset: n, limit: 1, bytes: n }));
    pre.textContent = `packet ${n + 1}, ${p.rows[0] ? p.rows[0].caplen : 0} bytes captured\n` + dump(p.hex || '');
  } catch (e) {
    pre.textContent = e.message;
  }
  pre.hidden = false;
}
