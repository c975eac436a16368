// The page: login, then three screens (Recording, Search, Captures) chosen by the URL's
// hash, so the browser's back button and bookmarks work.

import { call, setCsrf, showError } from './api.js';
import * as recording from './recording.js';
import * as search from './search.js';
import * as captures from './captures.js';
import * as sensors from './sensors.js';

const screens = { recording, search, captures, sensors };
let current = null;

function show(name) {
  if (!screens[name]) name = 'recording';
  for (const s of Object.keys(screens)) document.getElementById(s).hidden = s !== name;
  for (const a of document.querySelectorAll('#tabs a')) {
    a.setAttribute('aria-selected', String(a.dataset.screen === name));
  }
  if (current === screens[name]) return;
  if (current) current.leave();
  current = screens[name];
  current.enter();
}

function route() {
  show(location.hash.slice(1));
}

async function start(who) {
  setCsrf(who.csrf);
  document.getElementById('login').hidden = true;
  document.getElementById('tabs').hidden = false;
  const words = { login: 'logged in', certificate: 'client certificate', socket: 'Unix socket', bearer: 'bearer token' };
  document.getElementById('who').textContent = words[who.login] || '';
  document.getElementById('logout').hidden = who.login !== 'login';
  const names = await sensors.peers();
  document.getElementById('sensors-tab').hidden = names.length === 0;
  for (const s of Object.values(screens)) s.init({ go: (name) => { location.hash = name; }, peers: names });
  window.addEventListener('hashchange', route);
  route();
}

function askLogin() {
  const section = document.getElementById('login');
  const form = document.getElementById('login-form');
  section.hidden = false;
  form.token.focus();
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    showError(form, '');
    try {
      const who = await call('POST', '/login', { token: form.token.value });
      form.token.value = '';
      await start(who);
    } catch (e) {
      showError(form, e.message);
    }
  });
}

document.getElementById('logout').addEventListener('click', async () => {
  try {
    await call('POST', '/logout', {});
  } finally {
    location.hash = '';
    location.reload();
  }
});

const who = await call('GET', '/session');
if (who.login === 'none') askLogin();
else await start(who);
