// Drives the API reference of GET /docs in headless Chromium for
// usage-server/tests/server/reference.rs.
//
//   node reference.mjs <base URL> <output dir>
//
// Opens <base>/docs at 1280x800 with a listener for CSP violations installed before any
// script of the page runs, waits until Swagger UI has rendered the operations, expands
// `GetTeamCreditBalance`, saves a screenshot (reference.png) in <output dir>, and prints one
// JSON object of what the page shows: every operation's id, method and path, the statuses
// listed under the expanded one, the CSP violations, console errors, page errors and every
// request URL. It checks nothing itself; the Rust test asserts.
import { chromium } from "playwright-core";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

const [base, outDir] = process.argv.slice(2);
if (!base || !outDir) {
  console.error("usage: node reference.mjs <base URL> <output dir>");
  process.exit(2);
}
mkdirSync(outDir, { recursive: true });

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
  ],
});

const out = { requests: [], console_errors: [], page_errors: [] };
try {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  // Before the page's own scripts: a violation while Swagger UI starts is seen too.
  await context.addInitScript(() => {
    window.__csp = [];
    document.addEventListener("securitypolicyviolation", (e) =>
      window.__csp.push(e.violatedDirective + " " + e.blockedURI + " " + (e.sample || "")),
    );
  });
  const page = await context.newPage();
  page.on("request", (r) => out.requests.push(r.url()));
  page.on("console", (m) => {
    if (m.type() === "error") out.console_errors.push(m.text());
  });
  page.on("pageerror", (e) => out.page_errors.push(String(e)));

  const res = await page.goto(base + "/docs", { waitUntil: "load" });
  out.status = res.status();
  out.headers = res.headers();
  await page.waitForSelector(".opblock", { timeout: 30000 });
  out.title = await page.$eval(".info .title", (e) => e.childNodes[0].textContent.trim());
  out.operations = await page.$$eval(".opblock", (els) =>
    els.map((e) => ({
      id: e.id,
      method: e.querySelector(".opblock-summary-method").textContent.trim(),
      path: e.querySelector(".opblock-summary-path").getAttribute("data-path"),
    })),
  );
  // Expand one operation: its responses table lists every documented status.
  const op = "#operations-billing-GetTeamCreditBalance";
  await page.click(op + " .opblock-summary-control");
  await page.waitForSelector(op + " .responses-table .response-col_status", { timeout: 30000 });
  out.expanded_statuses = await page.$$eval(op + " .responses-table tr.response .response-col_status", (els) =>
    els.map((e) => e.textContent.trim()),
  );
  out.try_it_out = (await page.$$(op + " .try-out__btn")).length;
  await page.screenshot({ path: join(outDir, "reference.png") });
  out.csp_violations = await page.evaluate(() => window.__csp);
} finally {
  await browser.close();
}
console.log(JSON.stringify(out));
