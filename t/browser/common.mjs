// What the browser scripts share: command-line options, the list of checks they print, and
// how Debian's headless Chromium is started here (the flags keep it off the network: this
// machine reaches no host but its own).

export function arg(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}

export const checks = [];
export const screenshots = [];
export function check(name, ok, detail = '') {
  checks.push({ name, ok: !!ok, detail: String(detail) });
  return !!ok;
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export const chromiumArgs = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
  '--disable-dev-shm-usage',
];

// The one JSON document a script prints: {"checks":[...],"screenshots":[...]}.
export function report() {
  console.log(JSON.stringify({ checks, screenshots }));
}
