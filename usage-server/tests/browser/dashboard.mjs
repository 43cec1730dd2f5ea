// Drives the dashboard in headless Chromium for usage-server/tests/server/dashboard.rs.
//
//   node dashboard.mjs <base URL> <service key> <output dir> [start] [end]
//
// Opens <base>/dashboard at 1280x800, types the key into the key field (keyboard only),
// sets the period, waits until the page has loaded every figure, sorts the users table with
// the keyboard, saves screenshots (desktop and a 390 px phone) in <output dir>, and prints
// one JSON object of what the page shows. It checks nothing itself but what only the
// browser can see (the key's absence from request URLs and localStorage is reported, and
// the Rust test asserts it).
import { chromium } from "playwright-core";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

const [base, key, outDir, start, end] = process.argv.slice(2);
if (!base || !key || !outDir) {
  console.error("usage: node dashboard.mjs <base URL> <service key> <output dir> [start] [end]");
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

const out = { requests: [], console_errors: [], page_errors: [], csp_violations: [] };
try {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await context.newPage();
  page.on("request", (r) => {
    out.requests.push({
      method: r.method(),
      url: r.url(),
      // The key must travel only in this header.
      bearer: (r.headers()["authorization"] || "") === "Bearer " + key,
    });
  });
  page.on("console", (m) => {
    if (m.type() === "error") out.console_errors.push(m.text());
  });
  page.on("pageerror", (e) => out.page_errors.push(String(e)));

  const res = await page.goto(base + "/dashboard", { waitUntil: "load" });
  out.status = res.status();
  out.headers = res.headers();
  await page.evaluate(() => {
    window.__csp = [];
    document.addEventListener("securitypolicyviolation", (e) =>
      window.__csp.push(e.violatedDirective + " " + e.blockedURI),
    );
  });
  out.state_before = await page.getAttribute("body", "data-state");

  // The period first (the range form), then the key: typing it and pressing Enter loads.
  if (start) await page.fill("#start", start);
  if (end) await page.fill("#end", end);
  out.start = await page.inputValue("#start");
  out.end = await page.inputValue("#end");
  await page.focus("#key");
  await page.keyboard.type(key);
  await page.keyboard.press("Enter");
  await page.waitForFunction(
    () => ["ready", "error"].includes(document.body.dataset.state),
    null,
    { timeout: 30000 },
  );
  out.state = await page.getAttribute("body", "data-state");
  out.status_text = await page.textContent("#status");
  // Charts drawn: one uPlot canvas per chart.
  out.charts = await page.$$eval(".chart", (els) =>
    els.map((el) => ({ id: el.id, canvases: el.querySelectorAll("canvas").length })),
  );

  const figures = () =>
    page.$$eval("[data-figure]", (els) =>
      Object.fromEntries(els.map((e) => [e.dataset.figure, { value: e.dataset.value ?? null, text: e.textContent.trim() }])),
    );
  const rows = (sel) =>
    page.$$eval(sel + " tbody tr", (trs) =>
      trs.map((tr) => [...tr.children].map((c) => (c.dataset.value !== undefined ? c.dataset.value : c.textContent.trim()))),
    );
  out.figures = await figures();
  out.autocomplete = await rows("#table-autocomplete");
  out.activity = await rows("#table-activity");
  out.agent = await rows("#table-agent");
  out.languages = await rows("#table-languages");
  out.ides = await rows("#table-ides");
  out.users = await rows("#table-users");
  out.near = await rows("#table-near");
  out.users_sort = await page.$$eval("#table-users thead th", (ths) => ths.map((th) => th.getAttribute("aria-sort")));

  // The screenshots without a focus ring, scrolled to the top.
  await page.evaluate(() => {
    document.activeElement && document.activeElement.blur();
    window.scrollTo(0, 0);
  });
  await page.screenshot({ path: join(outDir, "dashboard.png") });
  await page.screenshot({ path: join(outDir, "dashboard-full.png"), fullPage: true });

  // Sort by e-mail with the keyboard: focus the header button, press Enter, then Space.
  await page.focus('#table-users button[data-sort="email"]');
  await page.keyboard.press("Enter");
  out.users_by_email = (await rows("#table-users")).map((r) => r[1]);
  out.users_sort_email = await page.getAttribute("#table-users thead th:nth-child(2)", "aria-sort");
  await page.keyboard.press("Space");
  out.users_sort_email_again = await page.getAttribute("#table-users thead th:nth-child(2)", "aria-sort");
  out.users_by_email_desc = (await rows("#table-users")).map((r) => r[1]);

  // Where the key may and may not be.
  out.local_storage = await page.evaluate(() => {
    const o = {};
    for (let i = 0; i < localStorage.length; i++) o[localStorage.key(i)] = localStorage.getItem(localStorage.key(i));
    return o;
  });
  out.session_has_key = await page.evaluate((k) => Object.values({ ...sessionStorage }).includes(k), key);
  out.key_in_dom = await page.evaluate((k) => document.documentElement.outerHTML.includes(k) || document.querySelector("#key").value.includes(k), key);
  out.page_url = page.url();
  out.csp_violations = await page.evaluate(() => window.__csp);

  // One group: type its name in the group field, Enter reloads.
  await page.focus("#group");
  await page.keyboard.type("engineering");
  await page.keyboard.press("Enter");
  await page.waitForFunction(
    () => ["ready", "error"].includes(document.body.dataset.state) && document.querySelector("#status").textContent.includes("engineering"),
    null,
    { timeout: 30000 },
  );
  out.group = {
    state: await page.getAttribute("body", "data-state"),
    status_text: await page.textContent("#status"),
    figures: await figures(),
    users: (await rows("#table-users")).length,
  };
  await page.fill("#group", "");
  await page.keyboard.press("Enter");
  await page.waitForFunction(() => document.querySelector("#status").textContent.includes("whole team"), null, { timeout: 30000 });

  // Phone width: no horizontal scrolling of the page, the figures still there.
  await page.setViewportSize({ width: 390, height: 844 });
  await page.waitForTimeout(300);
  out.phone = await page.evaluate(() => ({
    scroll_width: document.documentElement.scrollWidth,
    client_width: document.documentElement.clientWidth,
    cards: document.querySelectorAll("[data-figure]").length,
  }));
  await page.screenshot({ path: join(outDir, "dashboard-phone.png") });

  // A wrong key: refused, forgotten, and said so.
  await page.setViewportSize({ width: 1280, height: 800 });
  await page.click("#forget");
  out.after_forget = {
    state: await page.getAttribute("body", "data-state"),
    session: await page.evaluate(() => sessionStorage.length),
  };
  await page.focus("#key");
  await page.keyboard.type("usk_not_a_key");
  await page.keyboard.press("Enter");
  await page.waitForFunction(() => document.body.dataset.state === "error", null, { timeout: 30000 });
  out.wrong_key = {
    status_text: await page.textContent("#status"),
    session: await page.evaluate(() => sessionStorage.length),
    focused: await page.evaluate(() => document.activeElement && document.activeElement.id),
  };
  await context.close();
} finally {
  await browser.close();
}
console.log(JSON.stringify(out));
