// Page views decided at their document, in a real browser (run by t/355-browser-documents.t,
// which starts nginx, fills the room with scripted clients and hands their tickets over).
//
// Debian's headless Chromium, driven by playwright-core. The front location has
// `smart_limit_documents` before a `limit_req` without burst; every browser context is one
// person with an address of its own (an X-Forwarded-For header, which nginx's realip takes as
// the client's address). The room is full: `--holders` lists the scripted clients holding its
// places ({xff, cookie}). What a person sees at each page load is recorded: the document and
// every response of the load (page.on('response')), then the page's state at its load event.
// A load is `complete` (the origin's document, its style sheet, script and image each 200,
// the style applied, the image shown, the script ran), `waiting` (the waiting page, 503, with
// a position), or anything else, which fails: `broken` (the origin's HTML with an asset
// failing) or `other`.
//
//  1. Newcomers, one after another: each gets the waiting page, positions 1, 2, 3...
//  2. Places taken (queue_length, counters.queued and counters.admitted from the control
//     endpoint) equal the people shown a waiting page: no phantom place from the parallel
//     requests of a page, nor from a waiting page's refreshes.
//  3. Left alone, the waiting pages refresh themselves and stay waiting pages.
//  4. A holder logs out (the origin answers X-Smart-Limit: revoke): the head of the line is
//     let in at its next refresh and gets the complete page; the others' positions fall. Again
//     for each newcomer, in order.
//  5. Every admitted browser reloads quickly (overflowing the limit): the complete page each
//     time; active_sessions went up by one per person let in.
//  6. Two more holders log out: two free places, nobody waiting. Two new browsers each load
//     the page, reload it quickly and open it in two more tabs at once: the complete page
//     each time, and each browser takes at most one admitted place.
// Through it all: every load of every person is complete or waiting, a position never grows,
// and once let in a person never sees the waiting page again.
//
// Usage: node documents.mjs --base URL --holders FILE --label NAME --out DIR
//          [--newcomers 3] [--refresh 1] [--net 192.0.2] [--first 10] [--room shop]
// Prints one JSON document: {"checks":[{"name":..,"ok":..,"detail":..}],"screenshots":[..],
// "loads":{...}}. Exits 0 when it could run at all (the checks say what passed), 2 on a usage
// error.

import { chromium } from 'playwright-core';
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { arg, check, checks, chromiumArgs, screenshots, sleep } from './common.mjs';

// A screenshot is a record for a person to look at, not a check: a page that reloads itself
// every second can navigate while one is taken, so it is tried a few times and then given up.
async function keepScreenshot(page, path) {
  for (let i = 0; i < 3; i++) {
    try {
      await page.screenshot({ path, fullPage: true, timeout: 5000 });
      screenshots.push(path);
      return;
    } catch (e) {
      await sleep(200);
    }
  }
}

const base = arg('base');
const out = arg('out');
const label = arg('label', '');
const holdersFile = arg('holders');
const newcomers = Number(arg('newcomers', '3'));
const refresh = Number(arg('refresh', '1'));
const net = arg('net', '192.0.2');
const first = Number(arg('first', '10'));
const room = arg('room', 'shop');
// A synced room (sync=) ends a revoked session on the node only, and in the fleet's count at
// the end of its active window (docs/fleet.md): there the holders keep their sessions active
// (two quick requests a second, the second over the limit, so the room sees them), a holder
// that logs out also stops, and its place frees a window (active_window=, short) later. An
// admitted browser that stops asking lapses the same way: the active count may fall.
const synced = arg('synced', '0') === '1';
const chromiumPath = arg('chromium', '/usr/bin/chromium');
if (!base || !out || !holdersFile || !(newcomers > 0) || !(refresh > 0)) {
  console.error('usage: documents.mjs --base URL --holders FILE --label NAME --out DIR');
  process.exit(2);
}
mkdirSync(out, { recursive: true });
const holders = JSON.parse(readFileSync(holdersFile, 'utf8'));
const ASSETS = ['/style.css', '/app.js', '/logo.svg'];
const GREEN = 'rgb(10, 110, 60)';
const name = (s) => `${label}: ${s}`;
const t0 = Date.now();
const phase = (s) => console.error(`${((Date.now() - t0) / 1000).toFixed(1)}s ${label}: ${s}`);
const file = (s) => join(out, `documents-${label.replace(/[^A-Za-z0-9]+/g, '-')}-${s}.png`);

// Polls fn (sync or async) every 100 ms until it returns a truthy value, for at most ms.
// Returns that value, or null at the deadline.
async function until(fn, ms) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) return null;
    await sleep(100);
  }
}

async function control() {
  const res = await fetch(`${base}/control?room=${room}`);
  const j = await res.json();
  return j.rooms[0];
}
const brief = (s) => s && JSON.stringify({
  queue_length: s.queue_length, active_sessions: s.active_sessions,
  admitted: s.counters.admitted, queued: s.counters.queued,
});
// Polls the control endpoint until pred(state) holds (a synced room's figures move at its
// next sync); returns the last state seen either way.
async function controlUntil(pred, ms = 8000) {
  let last = null;
  await until(async () => { last = await control(); return pred(last); }, ms);
  return last;
}

const alive = new Set(synced ? holders : []);
let keeping = synced;
async function keepAlive() {
  while (keeping) {
    for (const h of [...alive]) {
      for (let i = 0; i < 2; i++) {
        await fetch(`${base}/`, { headers: { 'x-forwarded-for': h.xff, cookie: h.cookie }, redirect: 'manual' })
          .then((r) => r.text()).catch(() => {});
      }
    }
    await sleep(800);
  }
}
const keeper = keepAlive();

async function logout(h) {
  alive.delete(h);
  const res = await fetch(`${base}/logout`, {
    headers: { 'x-forwarded-for': h.xff, cookie: h.cookie }, redirect: 'manual',
  });
  await res.text();
  return { status: res.status, cookies: res.headers.getSetCookie().join(' | ') };
}

// One person: a browser context of its own (own cookies, own address), one tab, and what it
// saw at each page load.
class Person {
  constructor(who, xff, context, page) {
    Object.assign(this, { who, xff, context, page, loads: [], cur: null });
    page.on('request', (req) => {
      if (req.isNavigationRequest() && req.frame() === page.mainFrame() && !req.redirectedFrom()) {
        this.cur = { n: this.loads.length + 1, kind: 'pending', responses: [] };
        this.loads.push(this.cur);
      }
    });
    page.on('response', (r) => {
      if (!this.cur) return;
      const u = new URL(r.url());
      this.cur.responses.push({ path: u.pathname, status: r.status(), doc: r.request().isNavigationRequest() });
    });
    page.on('load', () => { if (this.cur) this.classify(this.cur); });
  }

  static async open(browser, who, xff) {
    const context = await browser.newContext({
      viewport: { width: 960, height: 720 }, locale: 'en-US',
      extraHTTPHeaders: { 'Accept-Language': 'en-US,en;q=0.9', 'X-Forwarded-For': xff },
    });
    return new Person(who, xff, context, await context.newPage());
  }

  // Another tab of the same browser (the same cookies and address).
  async tab(who) {
    return new Person(who, this.xff, this.context, await this.context.newPage());
  }

  async classify(load) {
    load.at = Date.now();
    let dom = null;
    try {
      dom = await this.page.evaluate(() => {
        const img = document.querySelector('#logo');
        const h1 = document.querySelector('h1');
        const pos = document.querySelector('.pos-num');
        return {
          origin: !!document.querySelector('#origin-page'),
          js: document.documentElement.dataset.js || '',
          css: h1 ? getComputedStyle(h1).color : '',
          img: img ? img.complete && img.naturalWidth > 0 : false,
          pos: pos ? pos.textContent.trim() : null,
          refresh: (document.querySelector('meta[http-equiv="refresh"]') || { content: null }).content,
          title: document.title,
        };
      });
    } catch (e) {
      load.kind = 'lost';   // the page navigated again before it could be looked at
      load.error = String(e && e.message || e).split('\n')[0];
      return;
    }
    const docs = load.responses.filter((r) => r.doc);
    const doc = docs[docs.length - 1];
    load.doc = docs.map((r) => `${r.path} ${r.status}`).join(' -> ');
    load.assets = Object.fromEntries(ASSETS.map((a) =>
      [a, load.responses.filter((r) => !r.doc && r.path === a).map((r) => r.status)]));
    load.dom = dom;
    if (dom.origin) {
      const assetsOk = ASSETS.every((a) => load.assets[a].length > 0 && load.assets[a].every((s) => s === 200));
      const ok = doc && doc.status === 200 && assetsOk && dom.js === 'ran' && dom.css === GREEN && dom.img;
      load.kind = ok ? 'complete' : 'broken';
    } else if (doc && doc.status === 503 && dom.pos !== null && /^\d+$/.test(dom.pos)) {
      load.kind = 'waiting';
      load.position = Number(dom.pos);
    } else {
      load.kind = 'other';
    }
  }

  // The loads looked at (complete, waiting, broken, other), oldest first.
  seen() { return this.loads.filter((l) => l.kind !== 'pending' && l.kind !== 'lost'); }
  last() { const s = this.seen(); return s[s.length - 1] || null; }
  // Runs a navigation (page.goto, page.reload) and waits until its load was looked at, so
  // that the next one does not cut the look short. Returns that load, or null.
  async load(navigate) {
    const n0 = this.loads.length;
    await navigate(this.page);
    return until(() => {
      const l = this.loads[this.loads.length - 1];
      return this.loads.length > n0 && l.kind !== 'pending' ? l : null;
    }, 10000);
  }
  // Waits for a load numbered above `after` to be looked at.
  async next(after, ms) {
    return until(() => this.seen().find((l) => l.n > after) || null, ms);
  }
}
const show = (l) => (l ? JSON.stringify({ n: l.n, kind: l.kind, position: l.position, doc: l.doc,
  assets: l.assets, dom: l.dom, responses: l.kind === 'other' ? l.responses : undefined }) : 'no load seen');

let browser;
const people = [];
const extra = [];
try {
  const M = holders.length;
  const s0 = await controlUntil((s) => s.active_sessions === M && s.queue_length === 0);
  check(name(`the room is full before the browsers come (active_sessions ${M} of ${M}, nobody waiting)`),
    s0.active_sessions === M && s0.queue_length === 0, brief(s0));

  phase('launch');
  browser = await chromium.launch({ executablePath: chromiumPath, headless: true, args: chromiumArgs });
  const slow = (refresh * 4 + 10) * 1000;   // a bound for things that take a refresh or two
  const freeing = slow + (synced ? 15000 : 0);   // ... and for a place to free

  phase('step 1');
  // 1. Newcomers meet the waiting page at their first document.
  for (let i = 1; i <= newcomers; i++) {
    const p = await Person.open(browser, `newcomer ${i}`, `${net}.${first + i}`);
    people.push(p);
    await p.page.goto(`${base}/`, { waitUntil: 'load' });
    const l = await p.next(0, 10000);
    check(name(`newcomer ${i} (${p.xff}), the room full: the waiting page, position ${i}, refreshing every ${refresh} s`),
      l && l.kind === 'waiting' && l.position === i && l.dom.refresh === String(refresh), show(l));
  }
  await keepScreenshot(people[0].page, file('waiting'));

  phase('step 2');
  // 2. One place in line per person shown a waiting page.
  const s1 = await controlUntil((s) => s.queue_length === newcomers
    && s.counters.queued - s0.counters.queued === newcomers);
  check(name(`places taken = people shown a waiting page: ${newcomers} in line, ${newcomers} queued, none admitted`),
    s1.queue_length === newcomers && s1.counters.queued - s0.counters.queued === newcomers
      && s1.counters.admitted === s0.counters.admitted && s1.active_sessions === M,
    `before ${brief(s0)} after ${brief(s1)}`);

  phase('step 3');
  // 3. Left alone, each waiting page refreshes itself (twice) and stays a waiting page.
  const refreshed = await Promise.all(people.map((p) => p.next((p.last() ? p.last().n : 0) + 1, slow)));
  people.forEach((p, i) => {
    const l = refreshed[i];
    check(name(`${p.who}'s waiting page refreshes itself twice and still waits, same place`),
      l && l.kind === 'waiting' && l.position === p.seen()[0].position, show(l));
  });
  const s2 = await control();
  check(name('the refreshes took no place: the line and the queued count are unchanged'),
    s2.queue_length === newcomers && s2.counters.queued - s0.counters.queued === newcomers
      && s2.counters.admitted === s0.counters.admitted, `before ${brief(s0)} now ${brief(s2)}`);

  phase('step 4');
  // 4. A place frees at a time: the head of the line is let in, the others move up.
  //    (In a synced room an admitted browser that stops asking lapses after the short
  //    window, so the next in line may be let in on that place before its holder leaves: there
  //    the position falls, or the person is let in. And two places freed within one sync are
  //    one band, taken by whoever of the band polls first (docs/fleet.md, "within the band
  //    ... there is little order"): there the one right behind may go first, nobody further.)
  for (let k = 0; k < newcomers; k++) {
    const p = people[k];
    if (k > 0) {
      const up = await until(() => {
        const l = p.last();
        return l && (l.kind === 'waiting' ? l.position === 1 : synced) ? l : null;
      }, freeing);
      check(name(`${p.who}'s position fell to 1 as the people ahead were let in${synced ? ' (or it was let in)' : ''}`),
        up, show(p.last()));
    }
    const bye = await logout(holders[k]);
    check(name(`holder ${k + 1} logs out (${holders[k].xff}): 200, its ticket deleted`),
      bye.status === 200 && new RegExp(`smart_limit_${room}=;|smart_limit_${room}=[^|]*Max-Age=0`).test(bye.cookies),
      JSON.stringify(bye));
    const inside = await until(() => p.seen().find((l) => l.kind !== 'waiting') || null, freeing);
    check(name(`${p.who} is let in at a refresh: the complete page (document 200, every asset 200, script ran)`),
      inside && inside.kind === 'complete' && inside.n > 1, inside ? show(inside) : show(p.last()));
    // Order: when p was let in, nobody behind it had been.
    const at = inside ? inside.at : Infinity;
    const behind = people.slice(k + (synced ? 2 : 1))
      .filter((q) => q.seen().some((l) => l.kind !== 'waiting' && l.at < at));
    check(name(`nobody ${synced ? 'but the next one ' : ''}behind ${p.who} was let in before it`), behind.length === 0,
      behind.map((q) => q.who).join(', '));
  }
  const admittedShot = file('admitted');
  await keepScreenshot(people[0].page, admittedShot);

  phase('step 5');
  // 5. An admitted browser loads everything, reloads over the limit included.
  for (const p of people) {
    const reloads = [];
    for (let r = 0; r < 3; r++) reloads.push(await p.load((pg) => pg.reload({ waitUntil: 'load' })));
    check(name(`${p.who}, admitted, reloads three times quickly: the complete page each time`),
      reloads.every((x) => x && x.kind === 'complete'), reloads.map(show).join('\n'));
  }
  const activeOk = (s) => (synced ? s.active_sessions <= M : s.active_sessions === M);
  const s3 = await controlUntil((s) => s.queue_length === 0 && activeOk(s)
    && s.counters.admitted - s0.counters.admitted === newcomers);
  check(name(`one admitted place per person let in: ${newcomers} admitted, active_sessions ${synced ? 'at most' : 'back to'} ${M}, nobody waiting`),
    s3.queue_length === 0 && activeOk(s3) && s3.counters.admitted - s0.counters.admitted === newcomers,
    `before ${brief(s0)} now ${brief(s3)}`);

  phase('step 6');
  // 6. Free places, nobody waiting: a new browser takes at most one place.
  const free = holders.slice(newcomers);
  for (const h of free) {
    const bye = await logout(h);
    check(name(`holder ${h.xff} logs out: 200`), bye.status === 200, JSON.stringify(bye));
  }
  let before = await controlUntil((s) => s.active_sessions <= M - free.length, freeing);
  check(name(`${free.length} places free, nobody waiting`),
    before.active_sessions <= M - free.length && (synced || before.active_sessions === M - free.length)
      && before.queue_length === 0, brief(before));
  for (let i = 1; i <= free.length; i++) {
    const p = await Person.open(browser, `visitor ${i}`, `${net}.${first + newcomers + i}`);
    extra.push(p);
    const s = [await p.load((pg) => pg.goto(`${base}/`, { waitUntil: 'load' }))];
    for (let r = 0; r < 3; r++) s.push(await p.load((pg) => pg.reload({ waitUntil: 'load' })));
    // (A synced node that has used its share of the interval may tell a newcomer to wait
    // although the fleet's picture shows places: issue 50, item 6. There the person's page is
    // still whole or the waiting page, never broken.)
    const whole = (x) => x && (x.kind === 'complete' || (synced && x.kind === 'waiting'));
    check(name(`${p.who} (${p.xff}), free places: the complete page at its load and three quick reloads${synced ? ' (or the waiting page)' : ''}`),
      s.every(whole), s.map(show).join('\n'));
    // Two more tabs at once: one document over the limit at least, met by the idle room.
    const tabs = [await p.tab(`${p.who} tab 2`), await p.tab(`${p.who} tab 3`)];
    extra.push(...tabs);
    const both = await Promise.all(tabs.map((t) => t.load((pg) => pg.goto(`${base}/`, { waitUntil: 'load' }))));
    check(name(`${p.who} opens the page in two more tabs at once: the complete page in both${synced ? ' (or the waiting page)' : ''}`),
      both.every(whole), both.map(show).join('\n'));
    // A synced room reports a place taken at its next sync: look twice, a sync apart.
    await sleep(500);
    const after = await control();
    check(name(`${p.who} took at most one admitted place (active_sessions ${before.active_sessions} -> ${after.active_sessions})`),
      after.active_sessions - before.active_sessions <= 1 && (synced || after.active_sessions >= before.active_sessions)
        && after.counters.admitted - before.counters.admitted <= 1
        && after.queue_length <= (synced ? 1 : 0),
      `before ${brief(before)} after ${brief(after)}`);
    before = after;
  }

  phase('end');
  // Through it all: complete or waiting, positions never grow, once in never back in line.
  for (const p of [...people, ...extra]) {
    const seen = p.seen();
    const bad = seen.filter((l) => l.kind !== 'complete' && l.kind !== 'waiting');
    check(name(`${p.who}: every page load (${seen.length}) was the complete page or the waiting page`),
      bad.length === 0, bad.map(show).join('\n'));
    const pos = seen.filter((l) => l.kind === 'waiting').map((l) => l.position);
    const grew = pos.some((v, j) => j > 0 && v > pos[j - 1]);
    const firstIn = seen.findIndex((l) => l.kind === 'complete');
    const backInLine = firstIn >= 0 && seen.slice(firstIn).some((l) => l.kind === 'waiting');
    // (A synced visitor's first page may be whole on its page pass while the node found no
    // place for it, as above: its next page is then the waiting page.)
    const visitor = synced && p.who.startsWith('visitor');
    check(name(`${p.who}: its position never grew, and once let in it never waited again`),
      !grew && (!backInLine || visitor), `positions ${pos.join(',')}; kinds ${seen.map((l) => l.kind).join(',')}`);
  }
} catch (e) {
  check(name('the browser test ran to the end'), false, e && e.stack ? e.stack : e);
} finally {
  keeping = false;
  await keeper;
  if (browser) await browser.close().catch(() => {});
}
const loads = Object.fromEntries([...people, ...extra].map((p) => [p.who, {
  xff: p.xff,
  kinds: p.loads.map((l) => l.kind + (l.position ? `@${l.position}` : '')
    + (l.dom && l.dom.refresh && l.dom.refresh !== String(refresh) ? `/${l.dom.refresh}s` : '')).join(' '),
}]));
console.log(JSON.stringify({ checks, screenshots, loads }));
