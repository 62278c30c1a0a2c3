// Takes a screenshot of a workflow's "User Metadata" tab in the Temporal Web UI
// (docs/DECIDING.md), with playwright-core and Debian's Chromium:
//   npm install playwright-core && node user-metadata.js URL OUT.png
// where URL is http://localhost:8233/namespaces/default/workflows/WF/RUN/history.
const { chromium } = require('playwright-core');
(async () => {
  const [url, out] = process.argv.slice(2);
  const b = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox'] });
  const p = await b.newPage({ viewport: { width: 1440, height: 1100 } });
  await p.goto(url, { waitUntil: 'domcontentloaded', timeout: 30000 });
  await p.getByText('Running').first().waitFor({ timeout: 30000 });
  await p.getByText('User Metadata').first().click();
  await p.waitForTimeout(4000);
  await p.screenshot({ path: out, fullPage: false });
  require('fs').writeFileSync(out + '.txt', await p.innerText('body'));
  await b.close();
})().catch(e => { console.error(e.message); process.exit(1); });
