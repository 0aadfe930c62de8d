// challenge=pow in a real browser (run by t/611-challenge-browser.t, which starts nginx with a
// full room: one admitted client, so a newcomer must solve before it takes a place).
//
// Debian's headless Chromium, driven by playwright-core. The browser opens the site, gets the
// challenge page ("Checking your browser"), whose Web Worker solves the seed; the page keeps
// the proof as the room's proof cookie and loads itself again, and the browser is shown the
// waiting page, first in line. Prints how long the solving took (the cost a browser pays).
// Then a browser with JavaScript off: its page comes back after the no-script wait and takes
// the next place without a proof. Last, the operator's own page at /own/, which hosts the
// challenge with {{challenge_script}}: solved there too.
//
// Usage: node challenge.mjs --base http://127.0.0.1:PORT --out DIR --bits N
// Prints one JSON document: {"checks":[...],"screenshots":[...],"solve_ms":N,
// "hashes_per_sec":N,"no_script_ms":N} (the solver's speed: its worker for two seconds on a
// seed it cannot solve; the time the script-less browser took to its place).

import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { arg, check, checks, chromiumArgs, screenshots } from './common.mjs';

const base = arg('base');
const out = arg('out');
const bits = Number(arg('bits', '0'));
const chromiumPath = arg('chromium', '/usr/bin/chromium');
if (!base || !out || !(bits > 0)) {
  console.error('usage: challenge.mjs --base URL --out DIR --bits N');
  process.exit(2);
}
mkdirSync(out, { recursive: true });

// The challenge page's solver, as a newcomer (outside the browser) is given it: the cookie
// check, then the challenge page (the room is full), its worker's script text.
async function challengeSolver() {
  const first = await fetch(base + '/', { redirect: 'manual', headers: { Accept: 'text/html' } });
  const ticket = (first.headers.get('set-cookie') || '').split(';')[0];
  const page = await fetch(base + '/', { headers: { Accept: 'text/html', Cookie: ticket } });
  const html = await page.text();
  const m = html.match(/<script id="sl-pow" type="text\/plain">([\s\S]*?)<\/script>/);
  return m ? m[1] : null;
}

// The page's solver starts as soon as the page loads and reloads the page once solved (16
// bits: about half a second here). To read the challenge page itself without racing it, the
// pages of a context start their workers' work only once the test says so: every Worker's
// postMessage waits for window.__slGo() (the tab's sessionStorage remembers it, so the page
// that comes back, and any later one, is not held).
async function holdSolvers(context) {
  await context.addInitScript(() => {
    if (sessionStorage.getItem('sl-go')) return;
    let go;
    const gate = new Promise((resolve) => { go = resolve; });
    window.__slGo = () => { sessionStorage.setItem('sl-go', '1'); go(); };
    const Real = window.Worker;
    window.Worker = function (url, options) {
      const w = new Real(url, options);
      const post = w.postMessage.bind(w);
      w.postMessage = (m) => { gate.then(() => post(m)); };
      return w;
    };
  });
}

// Reads the page's heading while its solver is held, then lets the solver go.
async function headingThenSolve(page) {
  const heading = ((await page.textContent('h1').catch(() => '')) || '').trim();
  await page.evaluate(() => window.__slGo && window.__slGo()).catch(() => {});
  return heading;
}

let browser;
let solveMs = null;
let rate = null;
let noScriptMs = null;
try {
  browser = await chromium.launch({ executablePath: chromiumPath, headless: true, args: chromiumArgs });
  const context = await browser.newContext({
    viewport: { width: 960, height: 720 },
    locale: 'en-US',
    extraHTTPHeaders: { 'Accept-Language': 'en-US,en;q=0.9' },
  });
  await holdSolvers(context);
  const page = await context.newPage();
  const statuses = [];
  page.on('response', (r) => { if (r.url() === base + '/') statuses.push(r.status()); });

  const t0 = Date.now();
  const first = await page.goto(base + '/', { waitUntil: 'domcontentloaded' });
  check('the browser gets the challenge page (503) while the room is full', first.status() === 503,
    first.status());
  // Read while the page's solver is held (holdSolvers): reading the live page raced the
  // solver's reload (a clean-clone run read the waiting page that had replaced it), and so did
  // reading the answer's body (another run got no body: the reload had dropped it).
  const heading = await headingThenSolve(page);
  check('the page says it checks the browser', /Checking your browser/.test(heading), heading);
  // (No screenshot here, nor a read of its solver: the page is solving and reloads itself
  // any moment; the solver's text for the speed measure below comes from another visitor.)

  // The worker solves and the page loads itself again: the waiting page, first in line.
  const placed = await page
    .waitForSelector('.pos-num:not(#progress)', { timeout: 120000 })
    .then(() => true, () => false);
  solveMs = Date.now() - t0;
  check('the page solves the challenge and comes back by itself with its place', placed,
    `${page.url()} statuses ${statuses.join(',')}`);
  const position = (await page.textContent('.pos-num').catch(() => '')).trim();
  check('the browser is first in line', position === '1', position);
  const cookies = await context.cookies(base);
  check('the proof cookie is spent (deleted) once the place is taken',
    !cookies.some((c) => c.name === 'smart_limit_shop_proof'), cookies.map((c) => c.name).join(','));
  check('the browser holds its ticket', cookies.some((c) => c.name === 'smart_limit_shop'),
    cookies.map((c) => c.name).join(','));
  const shot2 = join(out, 'challenge-placed.png');
  await page.screenshot({ path: shot2, fullPage: true });
  screenshots.push(shot2);

  // The solver's speed on this machine: the challenge page's worker, on a seed it cannot solve
  // (64 bits) for two seconds, counted by its progress reports (one per 16,384 tries).
  const solver = await challengeSolver();
  rate = await page.evaluate(async (src) => {
    if (!src) return null;
    const w = new Worker(URL.createObjectURL(new Blob([src], { type: 'text/javascript' })));
    let tries = 0;
    w.onmessage = (e) => { if (e.data.tries !== undefined) tries = e.data.tries; };
    const t0 = performance.now();
    w.postMessage({ seed: [1, 2, 3, 4, 5, 6, 7, 8, 9], bits: 64 });
    await new Promise((res) => setTimeout(res, 2000));
    w.terminate();
    return Math.round(tries / ((performance.now() - t0) / 1000));
  }, solver).catch(() => null);
  check('the solver\'s speed was measured', rate > 0, String(rate));

  // A browser that runs no script: the same page, whose <noscript> refresh brings it back
  // once its ticket is old enough to take a place without a proof (30 s and the expected
  // solving time of a slow phone), and not before.
  const plain = await browser.newContext({ javaScriptEnabled: false, locale: 'en-US' });
  const noJs = await plain.newPage();
  const n0 = Date.now();
  const seen = [];
  noJs.on('response', (r) => { if (r.url() === base + '/') seen.push([r.status(), Date.now() - n0]); });
  const asked = await noJs.goto(base + '/', { waitUntil: 'domcontentloaded' });
  const noJsHeading = (await noJs.textContent('h1').catch(() => '')) || '';
  check('without JavaScript: the challenge page too', asked.status() === 503
    && /Checking your browser/.test(noJsHeading), `${asked.status()} ${noJsHeading}`);
  const joined = await noJs
    .waitForSelector('.pos-num:not(#progress)', { timeout: 60000 })
    .then(() => true, () => false);
  const waitedMs = Date.now() - n0;
  noScriptMs = waitedMs;
  const noJsPos = (await noJs.textContent('.pos-num:not(#progress)').catch(() => '')).trim();
  check('without JavaScript: the page comes back by itself and takes a place, second in line',
    joined && noJsPos === '2', `${noJsPos} after ${waitedMs} ms; answers ${JSON.stringify(seen)}`);
  check('without JavaScript: not before the no-script wait (30 s)', waitedMs >= 30000, `${waitedMs} ms`);
  await plain.close();

  // A page of the operator's own that hosts the challenge ({{challenge_script}}, no progress
  // element): the same solver runs there, and the page comes back with its place, third.
  const own = await browser.newContext({ locale: 'en-US' });
  await holdSolvers(own);
  const ownPage = await own.newPage();
  const ownFirst = await ownPage.goto(base + '/own/', { waitUntil: 'domcontentloaded' });
  const ownHeading = await headingThenSolve(ownPage);
  check('a custom page with {{challenge_script}} answers the challenge',
    ownFirst.status() === 503 && ownHeading === 'Our shop: challenge',
    `${ownFirst.status()} ${ownHeading}`);
  const ownPlaced = await ownPage
    .waitForSelector('#place:not(:empty)', { timeout: 120000 })
    .then(() => true, () => false);
  const ownPos = (await ownPage.textContent('#place').catch(() => '')).trim();
  check('the custom page solves it and comes back with its place, third in line',
    ownPlaced && ownPos === '3', `${ownPos} ${ownPage.url()}`);
  await own.close();
} catch (e) {
  check('the browser test ran to the end', false, e && e.stack ? e.stack : e);
} finally {
  if (browser) await browser.close().catch(() => {});
}
console.log(JSON.stringify({ checks, screenshots, solve_ms: solveMs, hashes_per_sec: rate,
  no_script_ms: noScriptMs }));
