// An event's pre-queue in a real browser (run by t/605-event-countdown.t, which starts nginx
// with an event whose start is a few seconds away).
//
// Debian's headless Chromium, driven by playwright-core. The browser opens the site during the
// pre-queue: the page says when the room opens and counts down to it (its inline script
// runs: the countdown's text changes each second and stays consistent with the start); left
// alone, the page reloads itself at the start (within the spread of a few seconds) and lands
// on the origin page, its holder drawn first of a pre-queue of one. Screenshots go to --out.
//
// Usage: node countdown.mjs --base http://127.0.0.1:PORT --out DIR --start UNIX_SECONDS
// Prints one JSON document: {"checks":[...],"screenshots":[...]}. Exits 0 when it could run at
// all (the checks say what passed), 2 on a usage error.

import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { arg, check, chromiumArgs, report, screenshots, sleep } from './common.mjs';

const base = arg('base');
const out = arg('out');
const start = Number(arg('start', '0'));
const chromiumPath = arg('chromium', '/usr/bin/chromium');
if (!base || !out || !(start > 0)) {
  console.error('usage: countdown.mjs --base URL --out DIR --start UNIX_SECONDS');
  process.exit(2);
}
mkdirSync(out, { recursive: true });

// The countdown's text (m:ss or h:mm:ss) in seconds.
function seconds(text) {
  const parts = String(text).trim().split(':').map(Number);
  if (parts.length < 2 || parts.some((n) => !Number.isInteger(n))) return NaN;
  return parts.reduce((acc, n) => acc * 60 + n, 0);
}

let browser;
try {
  browser = await chromium.launch({ executablePath: chromiumPath, headless: true, args: chromiumArgs });
  const context = await browser.newContext({
    viewport: { width: 960, height: 720 },
    locale: 'en-US',
    extraHTTPHeaders: { 'Accept-Language': 'en-US,en;q=0.9' },
  });
  const page = await context.newPage();
  let navigations = 0;
  page.on('framenavigated', (f) => { if (f === page.mainFrame()) navigations++; });

  // 1. The pre-queue page: the start's time, and a countdown the page's script keeps. The
  // server wrote the page's refresh between these two moments.
  const sentAt = Date.now() / 1000;
  const first = await page.goto(base + '/', { waitUntil: 'load' });
  const loadedAt = Date.now() / 1000;
  check('the browser gets the pre-queue page (503) before the start', first.status() === 503,
    first.status());
  const heading = (await page.textContent('h1').catch(() => '')) || '';
  check('the page says the room opens soon', /Opening soon/.test(heading), heading);
  const datetime = await page.getAttribute('time#starts', 'datetime').catch(() => null);
  check('the page names the start', Date.parse(datetime) === start * 1000, datetime);
  const t1 = (await page.textContent('#countdown').catch(() => '')).trim();
  const left1 = seconds(t1);
  const expected = start - Date.now() / 1000;
  check('the countdown shows the time left to the start', Math.abs(left1 - expected) <= 2,
    `shown ${t1}, left ${expected.toFixed(1)}s`);
  const shot = join(out, 'prequeue.png');
  await page.screenshot({ path: shot, fullPage: true });
  screenshots.push(shot);
  // Read again about 2 s later; the drop is compared with the time that really passed between
  // the two reads (a loaded machine can stretch a 2.1 s sleep), give or take the display's
  // whole seconds and a read's latency.
  const read1 = Date.now();
  await sleep(2100);
  const t2 = (await page.textContent('#countdown').catch(() => '')).trim();
  const passed = (Date.now() - read1) / 1000;
  const dropped = left1 - seconds(t2);
  check('the countdown counts down by itself (its script runs)',
    dropped >= 1 && dropped >= passed - 1.5 && dropped <= passed + 1.5,
    `${t1} then ${t2}, ${passed.toFixed(1)}s apart`);
  // The refresh is the time to the start when the server answered, plus the spread (0 to 4 s),
  // in whole seconds: bounded by the moments the request left and the page had loaded, not by
  // when this script got round to reading it (a loaded machine took 1.2 s more once, and a
  // bound from that later moment failed).
  const meta = await page.getAttribute('meta[http-equiv="refresh"]', 'content').catch(() => null);
  const back = Number(meta);
  check('the page comes back at the start, within its spread of 4 seconds',
    back >= start - loadedAt - 1 && back <= start - sentAt + 4 + 1,
    `refresh ${meta}, start in ${(start - sentAt).toFixed(1)}s when sent, ${(start - loadedAt).toFixed(1)}s when loaded`);

  // 2. Left alone, the page reloads itself at the start and lands on the site. When the
  // browser asks again is the page's doing (its refresh); how long the answer then takes to
  // load is the machine's, so the time checked is the request's.
  let askedAt = null;
  page.on('request', (r) => {
    if (askedAt === null && r.isNavigationRequest() && r.frame() === page.mainFrame()) {
      askedAt = Date.now() / 1000;
    }
  });
  const landed = await page
    .waitForSelector('#origin-page', { timeout: Math.max(0, start * 1000 - Date.now()) + 10000 })
    .then(() => true, () => false);
  const at = Date.now() / 1000;
  check('at the start the page takes the browser to the site by itself', landed,
    `${page.url()} after ${navigations} navigation(s)`);
  const asked = askedAt ?? at;
  check('not before the start', asked >= start, `asked ${(asked - start).toFixed(1)}s after the start`);
  // Within the spread (4 s), the refresh's whole second and 2 s of timer slack; the page's
  // usual refresh would ask 8 s after the start (20 s after the load, 12 s before the start).
  check('within the spread after it', asked <= start + 4 + 1 + 2,
    `asked ${(asked - start).toFixed(1)}s after the start, landed ${(at - start).toFixed(1)}s after`);
  const shot2 = join(out, 'prequeue-admitted.png');
  await page.screenshot({ path: shot2, fullPage: true });
  screenshots.push(shot2);
} catch (e) {
  check('the browser test ran to the end', false, e && e.stack ? e.stack : e);
} finally {
  if (browser) await browser.close().catch(() => {});
}
report();
