// The waiting room in a real browser over HTTP/2 with TLS (run by t/360-http2.t, which starts
// nginx with `listen ... ssl; http2 on;` and a throw-away self-signed certificate).
//
// Debian's headless Chromium, driven by playwright-core, negotiates h2 by ALPN. The room has
// one place, held by a client of the test (its ticket is --release-cookie). The browser opens
// the site: the cookie check (307 with the ticket) and the waiting page must come over h2,
// with the position the test expects. Then the holder logs out (--release-path, answered by the
// origin with `X-Smart-Limit: revoke`) and the page, left alone, must land on the origin page
// with its style sheet and image, every one of them over h2.
//
// Usage: node h2-waiting.mjs --base https://127.0.0.1:PORT --out DIR --refresh SECONDS
//          --position N --release-path /logout --release-cookie 'smart_limit_shop=...'
//          [--chromium /usr/bin/chromium]
// Prints one JSON document: {"checks":[{"name":..,"ok":..,"detail":..}],"screenshots":[..]}.
// Exits 0 when it could run at all (the checks say what passed), 2 on a usage error.

import { chromium, request } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { arg, check, chromiumArgs, report, screenshots, sleep } from './common.mjs';


const base = arg('base');
const out = arg('out');
const refresh = Number(arg('refresh', '2'));
const position = arg('position', '1');
const releasePath = arg('release-path');
const releaseCookie = arg('release-cookie');
const chromiumPath = arg('chromium', '/usr/bin/chromium');
if (!base || !out || !(refresh > 0) || !releasePath || !releaseCookie) {
  console.error('usage: h2-waiting.mjs --base URL --out DIR --refresh SECONDS --position N '
    + '--release-path PATH --release-cookie NAME=VALUE');
  process.exit(2);
}
mkdirSync(out, { recursive: true });

const COOKIE = 'smart_limit_shop';
const browserArgs = [...chromiumArgs, '--ignore-certificate-errors'];
// What the page's navigation and resources came over ('h2', 'http/1.1', ...).
const navProtocol = (page) => page.evaluate(() => {
  const nav = performance.getEntriesByType('navigation')[0];
  return nav ? nav.nextHopProtocol : '';
}).catch((e) => `error: ${e}`);

let browser;
try {
  browser = await chromium.launch({ executablePath: chromiumPath, headless: true, args: browserArgs });
  const context = await browser.newContext({
    viewport: { width: 960, height: 720 },
    ignoreHTTPSErrors: true,
    locale: 'en-US',
    extraHTTPHeaders: { 'Accept-Language': 'en-US,en;q=0.9' },
  });
  const page = await context.newPage();
  const responses = [];
  page.on('response', (r) => responses.push(r));
  let navigations = 0;
  page.on('framenavigated', (f) => { if (f === page.mainFrame()) navigations++; });

  // 1. First contact: the cookie check, then the waiting page, both over h2.
  const first = await page.goto(base + '/', { waitUntil: 'load' });
  const hop = first.request().redirectedFrom();
  const hopResponse = hop ? await hop.response() : null;
  const hopCookie = hopResponse ? (await hopResponse.allHeaders())['set-cookie'] || '' : '';
  check('the first answer is the cookie check: 307 with the ticket cookie',
    hopResponse && hopResponse.status() === 307 && hopCookie.startsWith(`${COOKIE}=`),
    hopResponse ? `${hopResponse.status()} ${hopCookie.slice(0, 40)}` : 'no redirect before the page');
  check('the browser comes back with the ticket and gets the waiting page (503)',
    first.status() === 503, first.status());
  const proto = await navProtocol(page);
  check('the waiting page came over HTTP/2 (nextHopProtocol h2)', proto === 'h2', proto);
  const xProto = (await first.allHeaders())['x-proto'] || '';
  check('nginx says the same: $server_protocol HTTP/2.0, $http2 h2',
    /^HTTP\/2\.0 h2 \d+$/.test(xProto), xProto);
  const pos = (await page.textContent('.pos-num').catch(() => '')).trim();
  check(`the waiting page shows position ${position}`, pos === position, pos);
  const meta = await page.getAttribute('meta[http-equiv="refresh"]', 'content').catch(() => null);
  check('the waiting page asks to refresh itself', meta === String(refresh), meta);
  const jar = await context.cookies(base);
  const ticket = jar.find((c) => c.name === COOKIE);
  check('the ticket cookie is Secure and HttpOnly over TLS', ticket && ticket.secure && ticket.httpOnly,
    JSON.stringify(ticket || jar));
  const shot1 = join(out, 'h2-waiting.png');
  await page.screenshot({ path: shot1, fullPage: true });
  screenshots.push(shot1);

  // 2. Left alone, the page reloads itself (over h2) and keeps its place.
  const before = navigations;
  const deadline = Date.now() + (refresh * 2 + 3) * 1000;
  while (navigations === before && Date.now() < deadline) await sleep(100);
  await page.waitForLoadState('load').catch(() => {});
  const again = (await page.textContent('.pos-num').catch(() => '')).trim();
  const proto2 = await navProtocol(page);
  check('the page refreshes by itself over h2 and keeps its place',
    navigations > before && again === position && proto2 === 'h2',
    `${navigations - before} navigation(s), position ${again}, ${proto2}`);

  // 3. The holder logs out; the origin revokes its session (from outside the browser: a
  //    request context of its own, with the holder's ticket).
  const api = await request.newContext({ ignoreHTTPSErrors: true });
  const bye = await api.get(base + releasePath, { headers: { cookie: releaseCookie } });
  const byeCookie = (bye.headers()['set-cookie'] || '');
  check('the holder logs out: the origin revokes its session',
    bye.status() === 200 && /Max-Age=0/i.test(byeCookie) && !('x-smart-limit' in bye.headers()),
    `${bye.status()} ${byeCookie.slice(0, 80)}`);
  await api.dispose();

  // 4. The page lets itself in and loads the site, every request over h2.
  const landed = await page
    .waitForSelector('#origin-page', { timeout: (refresh * 3 + 5) * 1000 })
    .then(() => true, () => false);
  check('the waiting page takes the browser to the site by itself', landed, page.url());
  await page.waitForLoadState('load').catch(() => {});
  const site = await page.evaluate(() => {
    const img = document.querySelector('#logo');
    const h1 = document.querySelector('h1');
    const res = performance.getEntriesByType('resource')
      .map((e) => ({ name: e.name.replace(/^.*\//, '/'), proto: e.nextHopProtocol }));
    return {
      nav: (performance.getEntriesByType('navigation')[0] || {}).nextHopProtocol || '',
      css: h1 ? getComputedStyle(h1).color : '',
      img: img ? img.complete && img.naturalWidth > 0 : false,
      res,
    };
  });
  check('the origin page came over h2', site.nav === 'h2', site.nav);
  check('its style sheet applied and its image loaded',
    site.css === 'rgb(10, 110, 60)' && site.img, JSON.stringify(site));
  const wanted = ['/style.css', '/logo.svg'];
  check('its assets came over h2',
    wanted.every((w) => site.res.some((r) => r.name === w && r.proto === 'h2')), JSON.stringify(site.res));
  const ok200 = responses.filter((r) => /\/(style\.css|logo\.svg)$/.test(r.url()) && r.status() === 200);
  check('every asset answered 200 on the admitted ticket', ok200.length >= 2,
    responses.map((r) => `${r.status()} ${r.url()}`).join(', '));
  const shot2 = join(out, 'h2-admitted.png');
  await page.screenshot({ path: shot2, fullPage: true });
  screenshots.push(shot2);
} catch (e) {
  check('the browser test ran to the end', false, e && e.stack ? e.stack : e);
} finally {
  if (browser) await browser.close().catch(() => {});
}
report();
