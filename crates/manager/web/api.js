// The daemon's API as the page calls it: same origin, the login cookie sent by the
// browser, and the CSRF token on every change (POST, DELETE).

let csrf = '';

/** Sets the token that changes carry (from GET /session or POST /login). */
export function setCsrf(token) {
  csrf = token || '';
}

/** An answer of the API that is not 2xx: its status and the daemon's message. */
export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

/** One call; the JSON answer, or an ApiError with the daemon's `error`. */
export async function call(method, path, body, signal) {
  const headers = {};
  const opts = { method, headers, signal, credentials: 'same-origin' };
  if (method !== 'GET') headers['X-CSRF-Token'] = csrf;
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    opts.body = JSON.stringify(body);
  }
  const r = await fetch(path, opts);
  const text = await r.text();
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = null;
  }
  if (!r.ok) throw new ApiError(r.status, (json && json.error) || text || r.statusText);
  return json;
}

/** A URL query of the non-empty fields of `o`. */
export function query(o) {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(o)) {
    if (v !== undefined && v !== null && String(v).trim() !== '') p.set(k, String(v).trim());
  }
  return p.toString();
}

const pad = (n, w = 2) => String(n).padStart(w, '0');

/** A timestamp (ns since the epoch) in this browser's zone: `YYYY-MM-DD HH:MM:SS.mmm`. */
export function localTime(ns, ms = true) {
  const d = new Date(ns / 1e6);
  const s = `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  return ms ? `${s}.${pad(d.getMilliseconds(), 3)}` : s;
}

const LOCAL = /^(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2})(?::(\d{2})(\.\d+)?)?$/;

/**
 * A time as the API takes it: `YYYY-MM-DD HH:MM[:SS[.fff]]` in this browser's zone becomes
 * Unix seconds; anything else (Unix seconds, RFC 3339, `-15m`) goes as it is, for the
 * daemon to read or refuse.
 */
export function apiTime(text) {
  const t = (text || '').trim();
  const m = LOCAL.exec(t);
  if (!m) return t;
  const d = new Date(+m[1], +m[2] - 1, +m[3], +m[4], +m[5], +(m[6] || 0));
  const frac = m[7] ? m[7].slice(1) : '';
  return `${Math.floor(d.getTime() / 1000)}${frac ? '.' + frac : ''}`;
}

/** A count with thin separators. */
export function count(n) {
  return Math.round(n).toLocaleString('en-US');
}

/** Bytes in KiB, MiB, GiB. */
export function bytes(n) {
  if (n === null || n === undefined) return '–';
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) {
    n /= 1024;
    i++;
  }
  return `${i ? n.toFixed(1) : n} ${u[i]}`;
}

/** A duration in ns, short. */
export function duration(ns) {
  const s = ns / 1e9;
  if (s < 1) return `${(s * 1000).toFixed(1)} ms`;
  if (s < 120) return `${s.toFixed(2)} s`;
  if (s < 7200) return `${(s / 60).toFixed(1)} min`;
  return `${(s / 3600).toFixed(1)} h`;
}

/** Makes an element: tag, attributes, children (strings become text). */
export function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

/** Shows `message` in the form's error line, or hides it. */
export function showError(form, message) {
  const p = form.querySelector('[data-testid="error"]');
  p.textContent = message || '';
  p.hidden = !message;
}
