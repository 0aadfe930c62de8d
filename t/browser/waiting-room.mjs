// A real browser in the waiting room (run by t/350-browser.t, which starts nginx).
//
// Debian's headless Chromium, driven by playwright-core (installed by scripts/test into
// t/browser/node_modules). The room has one place, held by a scripted client; the browser
// opens the site, gets the waiting page with its position, and is left alone: the page must
// refresh by itself, and once the scripted client logs out (the origin answers
// `X-Smart-Limit: revoke`), land on the origin page with every asset loaded, although every
// one of those requests overflows `limit_req`. A screenshot of each state goes to --out.
//
// Usage: node waiting-room.mjs --base http://127.0.0.1:PORT --out DIR --refresh SECONDS
// Prints one JSON document: {"checks":[{"name":..,"ok":..,"detail":..}],"screenshots":[..]}.
// Exits 0 when it could run at all (the checks say what passed), 2 on a usage error.

import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { arg, check, chromiumArgs, report, screenshots, sleep } from './common.mjs';


const base = arg('base');
const out = arg('out');
const refresh = Number(arg('refresh', '2'));
const chromiumPath = arg('chromium', '/usr/bin/chromium');
if (!base || !out || !(refresh > 0)) {
  console.error('usage: waiting-room.mjs --base URL --out DIR --refresh SECONDS');
  process.exit(2);
}
mkdirSync(out, { recursive: true });


// A scripted client with a one-cookie jar (the ticket).
class Client {
  constructor() { this.cookies = new Map(); }
  async get(path, headers = {}) {
    const cookie = [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
    const res = await fetch(base + path, {
      headers: { ...headers, ...(cookie ? { cookie } : {}) },
      redirect: 'manual',
    });
    for (const line of res.headers.getSetCookie()) {
      const [pair, ...attrs] = line.split(';');
      const eq = pair.indexOf('=');
      const name = pair.slice(0, eq).trim();
      const value = pair.slice(eq + 1).trim();
      const gone = attrs.some((a) => /^\s*max-age\s*=\s*(0|-\d+)\s*$/i.test(a));
      if (gone || value === '') this.cookies.delete(name); else this.cookies.set(name, value);
    }
    const body = await res.text();
    return { status: res.status, headers: res.headers, body };
  }
}

const COOKIE = 'smart_limit_shop';


let browser;
try {
  // 1. A scripted visitor takes the only place. The first request of the run passes under the
  //    rate (no ticket); the next overflows limit_req and gets its ticket with the room's
  //    cookie check (307 back to the same URL); coming back with it, it is admitted.
  const holder = new Client();
  let held = null;
  for (let i = 0; i < 4; i++) {
    held = await holder.get('/');
    if (held.status === 200 && holder.cookies.has(COOKIE)) break;
  }
  check('a scripted visitor is admitted and holds the only place',
    held && held.status === 200 && holder.cookies.has(COOKIE),
    `${held && held.status} ${[...holder.cookies.keys()].join(',')}`);

  // playwright gives every launch a fresh, empty --user-data-dir of its own.
  browser = await chromium.launch({ executablePath: chromiumPath, headless: true, args: chromiumArgs });
  const context = await browser.newContext({
    viewport: { width: 960, height: 720 },
    locale: 'en-US',
    extraHTTPHeaders: { 'Accept-Language': 'en-US,en;q=0.9' },
  });
  const page = await context.newPage();
  const responses = [];
  page.on('response', (r) => responses.push({ url: r.url(), status: r.status() }));
  let navigations = 0;
  page.on('framenavigated', (f) => { if (f === page.mainFrame()) navigations++; });

  // 2. The waiting page, with a position.
  const first = await page.goto(base + '/', { waitUntil: 'load' });
  check('the browser gets the waiting page (503) while the room is full', first.status() === 503,
    first.status());
  const title = await page.title();
  check('the waiting page says the site is busy', /busy/i.test(title), title);
  const position = (await page.textContent('.pos-num').catch(() => '')).trim();
  check('the waiting page shows the position in line', position === '1', position);
  const meta = await page.getAttribute('meta[http-equiv="refresh"]', 'content').catch(() => null);
  check('the waiting page asks to refresh itself', meta === String(refresh), meta);
  const shot1 = join(out, 'waiting.png');
  await page.screenshot({ path: shot1, fullPage: true });
  screenshots.push(shot1);

  // 3. Left alone, the page reloads by itself and still waits.
  const before = navigations;
  const deadline = Date.now() + (refresh * 2 + 3) * 1000;
  while (navigations === before && Date.now() < deadline) await sleep(100);
  await page.waitForLoadState('load').catch(() => {});
  check('the waiting page refreshes by itself', navigations > before,
    `${navigations - before} navigation(s) in ${refresh * 2 + 3}s`);
  const stillWaiting = (await page.textContent('.pos-num').catch(() => '')).trim();
  check('after refreshing it still shows its place', stillWaiting === '1', stillWaiting);
  const shot2 = join(out, 'waiting-refreshed.png');
  await page.screenshot({ path: shot2, fullPage: true });
  screenshots.push(shot2);

  // 3b. Another visitor, on a phone, in Japanese, joins the line behind it: the responsive
  //     page in its Japanese variant, second in line.
  const phone = await browser.newContext({
    viewport: { width: 390, height: 844 },
    isMobile: true,
    locale: 'ja-JP',
    extraHTTPHeaders: { 'Accept-Language': 'ja-JP,ja;q=0.9' },
  });
  const jaPage = await phone.newPage();
  const ja = await jaPage.goto(base + '/', { waitUntil: 'load' });
  const jaLang = await jaPage.getAttribute('html', 'lang').catch(() => '');
  const jaPos = (await jaPage.textContent('.pos-num').catch(() => '')).trim();
  check('a second visitor in Japanese gets the Japanese page, second in line',
    ja.status() === 503 && jaLang === 'ja' && jaPos === '2番目', `${ja.status()} lang=${jaLang} pos=${jaPos}`);
  const shot3 = join(out, 'waiting-ja-mobile.png');
  await jaPage.screenshot({ path: shot3, fullPage: true });
  screenshots.push(shot3);
  await phone.close();

  // 4. The place frees: the holder logs out, the origin revokes its session.
  const bye = await holder.get('/logout');
  check('the origin revokes the holder\'s session (cookie deleted, header not passed on)',
    bye.status === 200 && !holder.cookies.has(COOKIE) && !bye.headers.has('x-smart-limit'),
    `${bye.status} cookie=${holder.cookies.has(COOKIE)} header=${bye.headers.get('x-smart-limit')}`);

  // 5. Without any help, the page lands on the origin with every asset loaded.
  responses.length = 0;
  const landed = await page
    .waitForSelector('#origin-page', { timeout: (refresh * 3 + 5) * 1000 })
    .then(() => true, () => false);
  check('the waiting page takes the browser to the site by itself', landed, page.url());
  await page.waitForLoadState('load').catch(() => {});
  await page.waitForFunction(() => document.documentElement.dataset.js === 'ran', null,
    { timeout: 5000 }).catch(() => {});
  const state = await page.evaluate(() => {
    const img = document.querySelector('#logo');
    const h1 = document.querySelector('h1');
    return {
      js: document.documentElement.dataset.js || '',
      css: h1 ? getComputedStyle(h1).color : '',
      img: img ? img.complete && img.naturalWidth > 0 : false,
      title: document.title,
    };
  });
  check('the origin page\'s JavaScript ran', state.js === 'ran', JSON.stringify(state));
  check('the origin page\'s style sheet applied', state.css === 'rgb(10, 110, 60)', state.css);
  check('the origin page\'s image loaded', state.img, JSON.stringify(state));
  const assets = responses.filter((r) => /\/(style\.css|app\.js|logo\.svg)(\?|$)/.test(r.url));
  const assetsOk = ['style.css', 'app.js', 'logo.svg'].every((a) =>
    assets.some((r) => r.url.includes(a) && r.status === 200));
  check('every asset answered 200 (each overflowed limit_req and passed on the ticket)', assetsOk,
    JSON.stringify(responses));
  const shot4 = join(out, 'admitted.png');
  await page.screenshot({ path: shot4, fullPage: true });
  screenshots.push(shot4);
  const cookies = await context.cookies(base);
  check('the browser now holds an admitted ticket', cookies.some((c) => c.name === COOKIE),
    cookies.map((c) => c.name).join(','));
} catch (e) {
  check('the browser test ran to the end', false, e && e.stack ? e.stack : e);
} finally {
  if (browser) await browser.close().catch(() => {});
}
report();
