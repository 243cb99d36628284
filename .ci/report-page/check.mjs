// The report page in a real browser: the system
// Chromium, driven by playwright-core, opens GET /verify of a running
// `acds serve`, uploads a genuine attestation bundle (with its output) and
// a tampered one, reads the verdicts, then opens the offline report that
// `acds verify --html` wrote. Every page must load nothing from elsewhere
// and cause no Content-Security-Policy violation. Screenshots go to OUTDIR.
//
//   node check.mjs BASE_URL OUTDIR OFFLINE_REPORT
import { chromium } from 'playwright-core';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [base, outdir, offline] = process.argv.slice(2);
if (!base || !outdir || !offline) {
  console.error('usage: node check.mjs BASE_URL OUTDIR OFFLINE_REPORT');
  process.exit(2);
}

function fail(msg) {
  console.error('report page: ' + msg);
  process.exitCode = 1;
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  // Root in a CI container has no user namespaces for Chromium's sandbox.
  args: process.getuid && process.getuid() === 0 ? ['--no-sandbox'] : [],
});
try {
  const context = await browser.newContext({ viewport: { width: 1200, height: 900 } });
  const page = await context.newPage();
  const problems = [];
  page.on('console', (m) => {
    if (m.type() === 'error' || m.type() === 'warning' || /Content.Security.Policy|Refused to/i.test(m.text())) {
      problems.push(`console ${m.type()}: ${m.text()}`);
    }
  });
  page.on('pageerror', (e) => problems.push('page error: ' + e.message));
  page.on('requestfailed', (r) => problems.push('request failed: ' + r.url()));
  page.on('request', (r) => {
    const u = r.url();
    if (!u.startsWith(base + '/') && !u.startsWith('file://')) problems.push('request outside the page: ' + u);
  });

  const cases = [
    { name: 'genuine', files: { '#bundle': join(outdir, 'bundle.b64'), '#output': join(outdir, 'output.json') }, want: 'VALID' },
    { name: 'tampered', files: { '#bundle': join(outdir, 'tampered.b64') }, want: 'INVALID' },
  ];
  for (const c of cases) {
    const resp = await page.goto(base + '/verify');
    const csp = resp.headers()['content-security-policy'] || '';
    if (resp.status() !== 200 || !csp.startsWith("default-src 'none'")) {
      fail(`GET /verify: status ${resp.status()}, CSP ${JSON.stringify(csp)}`);
      continue;
    }
    for (const [sel, file] of Object.entries(c.files)) await page.setInputFiles(sel, file);
    const [answer] = await Promise.all([page.waitForNavigation(), page.click('#verify')]);
    const verdict = (await page.textContent('#verdict'))?.trim();
    const valid = await page.getAttribute('#verdict', 'data-valid');
    const checks = await page.$$eval('#checks tr[data-check]', (rows) =>
      rows.map((r) => r.getAttribute('data-check') + '=' + r.children[1].textContent));
    console.log(`${c.name}: HTTP ${answer.status()}, verdict ${verdict} (data-valid=${valid}); checks ${checks.join(', ')}`);
    if (verdict !== c.want || valid !== String(c.want === 'VALID')) fail(`${c.name}: verdict ${verdict}, want ${c.want}`);
    if (c.want === 'VALID' && checks.some((x) => x.endsWith('=fail'))) fail(`${c.name}: a failed check on a valid report`);
    if (c.want === 'INVALID' && !checks.some((x) => x.endsWith('=fail'))) fail(`${c.name}: no failed check on an invalid report`);
    const shot = join(outdir, `report-${c.name}.png`);
    await page.screenshot({ path: shot, fullPage: true });
    console.log(`screenshot: ${shot}`);
  }

  // The offline report `acds verify --html` wrote: same page, from disk.
  await page.goto(pathToFileURL(offline).href);
  const offVerdict = (await page.textContent('#verdict'))?.trim();
  console.log(`offline report: verdict ${offVerdict}`);
  if (offVerdict !== 'VALID') fail(`offline report: verdict ${offVerdict}, want VALID`);
  const offShot = join(outdir, 'report-offline.png');
  await page.screenshot({ path: offShot, fullPage: true });
  console.log(`screenshot: ${offShot}`);

  if (problems.length) fail('problems seen by the browser:\n  ' + problems.join('\n  '));
  else console.log('no console error, no CSP violation, no request outside the page');
} finally {
  await browser.close();
}
