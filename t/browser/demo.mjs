// The README's demo in a real browser (run by t/356-demo-browser.t, which starts scripts/demo
// and runs the fill loop scripts/demo prints). Debian's headless Chromium, driven by
// playwright-core, opens the demo's page as the README says, after the loop: it must get the
// waiting page with its position, reloading every --refresh seconds (the demo's
// smart_limit_refresh), and left alone the position must count down (the loop's clients stop
// polling and lose their places after the demo's presence=20s), never grow, every load being
// the waiting page or the complete page; with --admit, the page must end on the complete page
// (every asset 200, the page's script saw its style sheet and image) once the loop's admitted
// clients stop counting as active (active_window=1m). A screenshot of the waiting page goes to
// --out/demo-waiting.png (and demo-admitted.png).
//
// Usage: node demo.mjs --base URL --out DIR [--refresh 5] [--countdown 45] [--admit 100]
// (--countdown: seconds to see the position fall; --admit: seconds, from the first load, to be
// let in, 0 to skip.) Prints one JSON document: {"checks":[...],"screenshots":[...],"loads":..}.

import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { arg, check, checks, chromiumArgs, screenshots, sleep } from './common.mjs';

const base = arg('base');
const out = arg('out');
const refresh = Number(arg('refresh', '5'));
const countdown = Number(arg('countdown', '45'));
const admit = Number(arg('admit', '0'));
const chromiumPath = arg('chromium', '/usr/bin/chromium');
if (!base || !out) {
  console.error('usage: demo.mjs --base URL --out DIR [--refresh S] [--countdown S] [--admit S]');
  process.exit(2);
}
mkdirSync(out, { recursive: true });
const ASSETS = ['/style.css', '/app.js', '/logo.svg'];

async function until(fn, ms) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) return null;
    await sleep(200);
  }
}

// What the person saw at each page load: the responses, then the page at its load event.
const loads = [];
let cur = null;
let browser;
let page;
function show(l) {
  return l ? JSON.stringify({ n: l.n, kind: l.kind, position: l.position, refresh: l.refresh,
    doc: l.doc, assets: l.assets, dom: l.dom }) : 'no load seen';
}
async function classify(load) {
  let dom;
  try {
    dom = await page.evaluate(() => {
      const pos = document.querySelector('.pos-num');
      const meta = document.querySelector('meta[http-equiv="refresh"]');
      return {
        title: document.title,
        pos: pos ? pos.textContent.trim() : null,
        refresh: meta ? meta.content : null,
        assets: document.body ? document.body.dataset.assets || '' : '',
        status: (document.getElementById('status') || { textContent: '' }).textContent,
      };
    });
  } catch (e) {
    load.kind = 'lost';
    return;
  }
  const docs = load.responses.filter((r) => r.doc);
  const doc = docs[docs.length - 1];
  load.doc = docs.map((r) => r.status).join(' -> ');
  load.assets = Object.fromEntries(ASSETS.map((a) =>
    [a, load.responses.filter((r) => !r.doc && r.path === a).map((r) => r.status)]));
  load.dom = dom;
  load.refresh = dom.refresh;
  if (dom.title === 'Launch day shop') {
    const ok = doc && doc.status === 200 && dom.assets === 'ok'
      && ASSETS.every((a) => load.assets[a].length > 0 && load.assets[a].every((s) => s === 200));
    load.kind = ok ? 'complete' : 'broken';
  } else if (doc && doc.status === 503 && dom.pos !== null && /^\d+$/.test(dom.pos)) {
    load.kind = 'waiting';
    load.position = Number(dom.pos);
  } else {
    load.kind = 'other';
  }
}
const seen = () => loads.filter((l) => l.kind !== 'pending' && l.kind !== 'lost');

try {
  browser = await chromium.launch({ executablePath: chromiumPath, headless: true, args: chromiumArgs });
  const context = await browser.newContext({
    viewport: { width: 960, height: 720 }, locale: 'en-US',
    extraHTTPHeaders: { 'Accept-Language': 'en-US,en;q=0.9' },
  });
  page = await context.newPage();
  page.on('request', (req) => {
    if (req.isNavigationRequest() && req.frame() === page.mainFrame() && !req.redirectedFrom()) {
      cur = { n: loads.length + 1, kind: 'pending', responses: [], at: Date.now() };
      loads.push(cur);
    }
  });
  page.on('response', (r) => {
    if (cur) cur.responses.push({ path: new URL(r.url()).pathname, status: r.status(), doc: r.request().isNavigationRequest() });
  });
  page.on('load', () => { if (cur) classify(cur); });
  const t0 = Date.now();

  // 1. Open the demo's page, as the README says, after the loop.
  await page.goto(`${base}/`, { waitUntil: 'load' });
  const first = await until(() => seen()[0] || null, 10000);
  check('the demo page, after the fill loop: the waiting page with a position',
    first && first.kind === 'waiting' && first.position > 0, show(first));
  check(`the waiting page reloads every ${refresh} s (the demo's smart_limit_refresh, as the README says)`,
    first && first.refresh === String(refresh), show(first));
  const shot = join(out, 'demo-waiting.png');
  await page.screenshot({ path: shot, fullPage: true }).catch(() => {});
  screenshots.push(shot);

  // 2. Left alone, it counts down.
  const start = first && first.kind === 'waiting' ? first.position : 0;
  const fell = await until(() => seen().find((l) => l.kind === 'waiting' && l.position < start)
    || seen().find((l) => l.kind === 'complete') || null, countdown * 1000);
  check(`left alone, the position counts down (from ${start}) on the page's own reloads`,
    fell && (fell.kind === 'complete' || fell.position < start), fell ? show(fell) : show(seen().at(-1)));
  const waitingLoads = seen().filter((l) => l.kind === 'waiting');
  const shot2 = join(out, 'demo-waiting-later.png');
  await page.screenshot({ path: shot2, fullPage: true }).catch(() => {});
  screenshots.push(shot2);

  // 3. (--admit) It ends on the complete page.
  if (admit > 0) {
    const left = Math.max(0, admit * 1000 - (Date.now() - t0));
    const inside = await until(() => seen().find((l) => l.kind !== 'waiting') || null, left);
    check('the page is let in and loads whole: the document and every asset 200, its script ran',
      inside && inside.kind === 'complete', inside ? show(inside) : show(seen().at(-1)));
    if (inside) {
      const shot3 = join(out, 'demo-admitted.png');
      await page.screenshot({ path: shot3, fullPage: true }).catch(() => {});
      screenshots.push(shot3);
    }
  }

  // Through it all.
  const all = seen();
  const bad = all.filter((l) => l.kind !== 'waiting' && l.kind !== 'complete');
  check(`every load (${all.length}) was the waiting page or the complete page`, bad.length === 0,
    bad.map(show).join('\n'));
  const pos = all.filter((l) => l.kind === 'waiting').map((l) => l.position);
  check('the position never grew', !pos.some((v, i) => i > 0 && v > pos[i - 1]), pos.join(','));
  check('every waiting page said the same refresh', waitingLoads.every((l) => l.refresh === first.refresh),
    waitingLoads.map((l) => l.refresh).join(','));
} catch (e) {
  check('the browser test ran to the end', false, e && e.stack ? e.stack : e);
} finally {
  if (browser) await browser.close().catch(() => {});
}
const t = loads.length ? loads[0].at : 0;
console.log(JSON.stringify({ checks, screenshots,
  loads: loads.map((l) => `${((l.at - t) / 1000).toFixed(1)}s ${l.kind}${l.position ? `@${l.position}` : ''}`
    + `${l.refresh ? ` (refresh ${l.refresh})` : ''}`).join(', ') }));
