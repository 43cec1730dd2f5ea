// The usage dashboard: every figure is read from the server's public API with the key the
// user types, sent as `Authorization: Bearer` (never in a URL, never in localStorage).
// Plain JavaScript, no build step; charts by uPlot (vendored, /dashboard/uPlot.iife.min.js).
// docs/dashboard.md lists the call behind each figure.
"use strict";

(function () {
  const KEY_SLOT = "usage-dashboard.service-key";
  const DAY_MS = 86400000;
  const MAX_DAYS = 3660;
  const fmt = new Intl.NumberFormat("en-US");

  // ---------------------------------------------------------------------------------
  // The key: in this tab's sessionStorage (or only in memory where that is unavailable).

  let memoryKey = null;
  function readKey() {
    try {
      return window.sessionStorage.getItem(KEY_SLOT) || memoryKey;
    } catch (_) {
      return memoryKey;
    }
  }
  function storeKey(key) {
    memoryKey = key;
    try {
      window.sessionStorage.setItem(KEY_SLOT, key);
    } catch (_) {
      // Memory only: the key is lost on reload, which is the safe side.
    }
  }
  function forgetKey() {
    memoryKey = null;
    try {
      window.sessionStorage.removeItem(KEY_SLOT);
    } catch (_) {
      // Nothing stored.
    }
  }

  // ---------------------------------------------------------------------------------
  // The API.

  class ApiFailure extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  async function call(method, path, body) {
    const key = readKey();
    if (!key) throw new ApiFailure(401, "unauthenticated", "no service key");
    const headers = { Authorization: "Bearer " + key, Accept: "application/json" };
    const init = { method, headers, cache: "no-store", credentials: "omit", referrerPolicy: "no-referrer" };
    if (body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const res = await fetch(path, init);
    const text = await res.text();
    let json = null;
    try {
      json = text ? JSON.parse(text) : null;
    } catch (_) {
      json = null;
    }
    if (!res.ok) {
      const code = json && json.code ? json.code : "http_" + res.status;
      const message = json && json.message ? json.message : text.slice(0, 200);
      throw new ApiFailure(res.status, code, message);
    }
    return json;
  }

  /** POST /api/v1/<op>: the key goes in the Authorization header, not in the body. */
  function op(name, body) {
    return call("POST", "/api/v1/" + name, body);
  }

  /** Every page of a GET /api/v2/ endpoint (cursor pagination). */
  async function allPages(path, params) {
    const rows = [];
    let cursor = null;
    for (let i = 0; i < 1000; i++) {
      const q = new URLSearchParams(params);
      q.set("limit", "1000");
      if (cursor) q.set("cursor", cursor);
      const page = await call("GET", path + "?" + q.toString());
      rows.push(...page.data);
      if (!page.next_cursor) return rows;
      cursor = page.next_cursor;
    }
    throw new ApiFailure(0, "too_many_pages", "more than 1000 pages");
  }

  // ---------------------------------------------------------------------------------
  // Days and numbers.

  function isoDay(d) {
    return d.toISOString().slice(0, 10);
  }
  function dayMs(s) {
    return Date.parse(s + "T00:00:00Z");
  }
  function daysOf(start, end) {
    const out = [];
    for (let t = dayMs(start); t <= dayMs(end); t += DAY_MS) out.push(isoDay(new Date(t)));
    return out;
  }
  /** An API number (a decimal string in Analytics answers) as a Number; absent is 0. */
  function num(v) {
    if (v === undefined || v === null || v === "") return 0;
    const n = Number(v);
    return Number.isFinite(n) ? n : 0;
  }
  /** Hundredths of a credit as a decimal string, "1234.05". */
  function credits(hundredths) {
    const n = Math.round(hundredths);
    const a = Math.abs(n);
    // The sign written apart: -0.05 has a whole part of 0.
    return (n < 0 ? "-" : "") + Math.trunc(a / 100) + "." + String(a % 100).padStart(2, "0");
  }
  function creditsText(hundredths) {
    const s = credits(hundredths);
    const [w, f] = s.split(".");
    return fmt.format(Number(w)) + "." + f;
  }

  // ---------------------------------------------------------------------------------
  // The DOM.

  const $ = (sel) => document.querySelector(sel);
  const statusEl = () => $("#status");

  function setStatus(text, isError) {
    const el = statusEl();
    el.textContent = text;
    el.classList.toggle("error", !!isError);
  }

  function setFigure(name, value, text) {
    const el = document.querySelector('[data-figure="' + name + '"]');
    if (!el) return;
    el.dataset.value = String(value);
    el.textContent = text === undefined ? String(value) : text;
  }

  function cell(tag, text, cls) {
    const c = document.createElement(tag);
    c.textContent = text;
    if (cls) c.className = cls;
    return c;
  }

  function fillRows(tbody, rows) {
    tbody.replaceChildren(
      ...rows.map((cells) => {
        const tr = document.createElement("tr");
        cells.forEach((c, i) => {
          const td = cell(i === 0 ? "th" : "td", c.text, c.num ? "num" : "");
          if (i === 0) td.scope = "row";
          if (c.value !== undefined) td.dataset.value = String(c.value);
          if (c.node) td.replaceChildren(c.node);
          tr.appendChild(td);
        });
        return tr;
      }),
    );
  }

  // ---------------------------------------------------------------------------------
  // Charts (uPlot). Lines differ by dash and markers as well as colour.

  const STYLES = [
    { stroke: "#0b5cad", dash: [], fill: "#0b5cad" }, // solid, filled dots
    { stroke: "#b3541e", dash: [8, 5], fill: "#ffffff" }, // dashed, hollow dots
    { stroke: "#2e7d32", dash: [2, 4], fill: null }, // dotted, no dots
  ];
  const charts = new Map();

  function chartSize(el) {
    const width = Math.max(260, Math.floor(el.clientWidth || 600));
    return { width, height: width < 600 ? 220 : 260 };
  }

  function drawChart(id, days, series, twoScales) {
    const el = document.getElementById(id);
    const old = charts.get(id);
    if (old) old.destroy();
    el.replaceChildren();
    if (typeof window.uPlot !== "function") {
      el.textContent = "The chart library did not load; the figures are in the table below.";
      return;
    }
    const xs = days.map((d) => dayMs(d) / 1000);
    const opts = Object.assign(chartSize(el), {
      tzDate: (ts) => window.uPlot.tzDate(new Date(ts * 1000), "Etc/UTC"),
      scales: { x: { time: true } },
      cursor: { drag: { x: false, y: false } },
      series: [
        { label: "Day", value: (u, v) => (v == null ? "–" : isoDay(new Date(v * 1000))) },
      ].concat(
        series.map((s, i) => {
          const st = STYLES[i];
          return {
            label: s.label,
            scale: twoScales && i === 1 ? "y2" : "y",
            stroke: st.stroke,
            width: 2,
            dash: st.dash,
            value: (u, v) => (v == null ? "–" : s.format ? s.format(v) : fmt.format(v)),
            points: st.fill
              ? { show: true, size: 6, width: 2, stroke: st.stroke, fill: st.fill }
              : { show: false },
          };
        }),
      ),
      axes: [
        {},
        // With two scales each axis is named after its line; with one, the legend names them.
        { scale: "y", label: twoScales ? series[0].label : "", size: 60 },
      ].concat(
        twoScales
          ? [{ scale: "y2", side: 1, grid: { show: false }, label: series[1].label, size: 60 }]
          : [],
      ),
    });
    const data = [xs].concat(series.map((s) => s.values));
    const chart = new window.uPlot(opts, data, el);
    charts.set(id, chart);
  }

  if (typeof ResizeObserver === "function") {
    const ro = new ResizeObserver(() => {
      for (const [id, chart] of charts) {
        const el = document.getElementById(id);
        const size = chartSize(el);
        if (size.width !== chart.width) chart.setSize(size);
      }
    });
    document.addEventListener("DOMContentLoaded", () => {
      document.querySelectorAll(".chart").forEach((el) => ro.observe(el));
    });
  }

  // ---------------------------------------------------------------------------------
  // The users table, sortable by its header buttons (aria-sort on the header cells).

  let users = [];
  // Each user's credits in the cycle (GET /api/v2/credits/users), by e-mail.
  let creditsOf = new Map();
  let sort = { key: "activeDays", dir: "descending" };

  /** A user's add-on figures: used and remaining in hundredths (remaining null without a
   * cap), and where the cap comes from. */
  function addOn(u) {
    const c = creditsOf.get(u.email);
    if (!c) return { used: 0, remaining: null, source: "" };
    const h = (v) => Math.round(num(v) * 100);
    return {
      used: h(c.add_on_credits_used),
      remaining: c.remaining_add_on_credits === undefined ? null : h(c.remaining_add_on_credits),
      source: c.cap_source || "",
    };
  }

  function compareUsers(a, b) {
    const k = sort.key;
    let c;
    if (k === "activeDays") c = num(a.activeDays) - num(b.activeDays);
    else if (k === "used") c = addOn(a).used - addOn(b).used;
    else if (k === "remaining") {
      const ra = addOn(a).remaining;
      const rb = addOn(b).remaining;
      // No cap sorts after every capped amount.
      c = ra === rb ? 0 : ra === null ? 1 : rb === null ? -1 : ra - rb;
    } else if (k === "capSource") c = addOn(a).source.localeCompare(addOn(b).source);
    else c = String(a[k] || "").localeCompare(String(b[k] || ""));
    if (sort.dir === "descending") c = -c;
    return c || String(a.email).localeCompare(String(b.email));
  }

  function renderUsers() {
    const rows = users.slice().sort(compareUsers);
    fillRows(
      $("#table-users tbody"),
      rows.map((u) => [
        { text: u.name || "" },
        { text: u.email || "" },
        { text: fmt.format(num(u.activeDays)), value: num(u.activeDays), num: true },
        { text: u.lastUpdateTime ? u.lastUpdateTime.replace("T", " ").replace(/\.\d+/, "").replace("Z", " UTC") : "never" },
        { text: String(u.teamStatus || "").replace("USER_TEAM_STATUS_", "").toLowerCase() },
        ...((a) => [
          { text: creditsText(a.used), value: credits(a.used), num: true },
          a.remaining === null
            ? { text: "no cap", value: "none", num: true }
            : { text: creditsText(a.remaining), value: credits(a.remaining), num: true },
          { text: a.source || "none" },
        ])(addOn(u)),
      ]),
    );
    document.querySelectorAll("#table-users thead th").forEach((th) => {
      const b = th.querySelector("button");
      th.setAttribute("aria-sort", b && b.dataset.sort === sort.key ? sort.dir : "none");
    });
  }

  function onSort(ev) {
    const b = ev.target.closest("button[data-sort]");
    if (!b) return;
    const key = b.dataset.sort;
    if (sort.key === key) sort.dir = sort.dir === "ascending" ? "descending" : "ascending";
    else sort = { key, dir: key === "activeDays" ? "descending" : "ascending" };
    renderUsers();
  }

  // ---------------------------------------------------------------------------------
  // Loading.

  function range() {
    const start = $("#start").value;
    const end = $("#end").value;
    const group = $("#group").value.trim();
    if (!/^\d{4}-\d{2}-\d{2}$/.test(start) || !/^\d{4}-\d{2}-\d{2}$/.test(end)) {
      throw new ApiFailure(0, "invalid_range", "give both days of the period");
    }
    if (dayMs(start) > dayMs(end)) throw new ApiFailure(0, "invalid_range", "the period ends before it starts");
    if ((dayMs(end) - dayMs(start)) / DAY_MS >= MAX_DAYS) {
      throw new ApiFailure(0, "invalid_range", "the period is longer than ten years");
    }
    return { start, end, group };
  }

  function byDay(items, days, fields) {
    const m = new Map();
    for (const it of items) m.set(it.item.day, it.item);
    return fields.map((f) => days.map((d) => num(m.get(d) && m.get(d)[f])));
  }

  function sumOf(xs) {
    return xs.reduce((a, b) => a + b, 0);
  }

  function ranked(tbody, items, key) {
    const rows = items
      .map((it) => ({ name: it.item[key], n: num(it.item.acceptances) }))
      .sort((a, b) => b.n - a.n || String(a.name).localeCompare(String(b.name)));
    const total = sumOf(rows.map((r) => r.n)) || 1;
    fillRows(
      tbody,
      rows.map((r) => {
        const meter = document.createElement("meter");
        meter.min = 0;
        meter.max = 100;
        meter.value = (100 * r.n) / total;
        const pct = ((100 * r.n) / total).toFixed(1) + "%";
        meter.setAttribute("aria-label", r.name + ": " + pct);
        const wrap = document.createElement("span");
        wrap.className = "share";
        wrap.append(meter, " " + pct);
        return [{ text: r.name }, { text: fmt.format(r.n), value: r.n, num: true }, { text: pct, node: wrap }];
      }),
    );
  }

  async function loadAnalytics(r, days) {
    const filters = [
      { name: "date", filter: "QUERY_FILTER_GE", value: r.start },
      { name: "date", filter: "QUERY_FILTER_LE", value: r.end },
    ];
    const sum = (field, name) => ({ field, aggregation_function: "QUERY_AGGREGATION_SUM", name });
    const count = (field, name) => ({ field, aggregation_function: "QUERY_AGGREGATION_COUNT", name });
    const perDay = [{ field: "date", name: "day" }];
    const body = {
      query_requests: [
        { data_source: "QUERY_DATA_SOURCE_USER_DATA", selections: [sum("num_acceptances", "acceptances"), sum("num_lines_accepted", "lines")], filters, aggregations: perDay },
        { data_source: "QUERY_DATA_SOURCE_USER_DATA", selections: [sum("num_acceptances", "acceptances")], filters, aggregations: [{ field: "language", name: "language" }] },
        { data_source: "QUERY_DATA_SOURCE_USER_DATA", selections: [sum("num_acceptances", "acceptances")], filters, aggregations: [{ field: "ide", name: "ide" }] },
        { data_source: "QUERY_DATA_SOURCE_CHAT_DATA", selections: [sum("num_chats_received", "chats")], filters, aggregations: perDay },
        { data_source: "QUERY_DATA_SOURCE_COMMAND_DATA", selections: [count("accepted", "commands"), sum("accepted", "accepted")], filters, aggregations: perDay },
        { data_source: "QUERY_DATA_SOURCE_AGENT_DATA", selections: [count("agent_id", "runs"), sum("prompts_used", "prompts"), sum("flex_credits_used", "flex")], filters, aggregations: perDay },
      ],
    };
    if (r.group) body.group_name = r.group;
    const res = await op("Analytics", body);
    const q = res.queryResults.map((x) => x.responseItems || []);

    const [acc, lines] = byDay(q[0], days, ["acceptances", "lines"]);
    setFigure("acceptances", sumOf(acc), fmt.format(sumOf(acc)));
    setFigure("lines", sumOf(lines), fmt.format(sumOf(lines)));
    drawChart("chart-autocomplete", days, [
      { label: "Acceptances", values: acc },
      { label: "Lines accepted", values: lines },
    ], true);
    fillRows($("#table-autocomplete tbody"), days.map((d, i) => [
      { text: d },
      { text: fmt.format(acc[i]), value: acc[i], num: true },
      { text: fmt.format(lines[i]), value: lines[i], num: true },
    ]));

    ranked($("#table-languages tbody"), q[1], "language");
    ranked($("#table-ides tbody"), q[2], "ide");

    const [chats] = byDay(q[3], days, ["chats"]);
    const [commands, accepted] = byDay(q[4], days, ["commands", "accepted"]);
    setFigure("chats", sumOf(chats), fmt.format(sumOf(chats)));
    setFigure("commands", sumOf(commands), fmt.format(sumOf(commands)));
    setFigure("accepted-commands", sumOf(accepted), fmt.format(sumOf(accepted)));
    drawChart("chart-activity", days, [
      { label: "Chat messages", values: chats },
      { label: "Commands", values: commands },
      { label: "Accepted commands", values: accepted },
    ], false);
    fillRows($("#table-activity tbody"), days.map((d, i) => [
      { text: d },
      { text: fmt.format(chats[i]), value: chats[i], num: true },
      { text: fmt.format(commands[i]), value: commands[i], num: true },
      { text: fmt.format(accepted[i]), value: accepted[i], num: true },
    ]));

    const [runs, prompts, flex] = byDay(q[5], days, ["runs", "prompts", "flex"]);
    setFigure("runs", sumOf(runs), fmt.format(sumOf(runs)));
    setFigure("credits", credits(sumOf(prompts)), creditsText(sumOf(prompts)));
    drawChart("chart-agent", days, [
      { label: "Agent runs", values: runs },
      { label: "Prompt credits", values: prompts.map((p) => p / 100), format: (v) => creditsText(v * 100) },
    ], true);
    fillRows($("#table-agent tbody"), days.map((d, i) => [
      { text: d },
      { text: fmt.format(runs[i]), value: runs[i], num: true },
      { text: creditsText(prompts[i]), value: credits(prompts[i]), num: true },
      { text: creditsText(flex[i]), value: credits(flex[i]), num: true },
    ]));
  }

  async function loadUsers(r) {
    const params = { start: r.start, end: r.end };
    if (r.group) params.group = r.group;
    users = await allPages("/api/v2/users/activity", params);
    const active = users.filter((u) => num(u.activeDays) > 0).length;
    setFigure("active-users", active, fmt.format(active) + " of " + fmt.format(users.length));
    renderUsers();
  }

  async function loadCredits() {
    const [all, near] = await Promise.all([
      allPages("/api/v2/credits/users", {}),
      allPages("/api/v2/credits/users", { min_percent: "80" }),
    ]);
    creditsOf = new Map(all.map((c) => [c.email, c]));
    renderUsers();
    fillRows(
      $("#table-near tbody"),
      near.map((c) => [
        { text: c.email },
        { text: creditsText(Math.round(num(c.add_on_credits_used) * 100)), value: c.add_on_credits_used, num: true },
        { text: fmt.format(num(c.add_on_credit_cap)), value: String(c.add_on_credit_cap), num: true },
        // A cap of 0 has no percentage: any use is over it.
        c.percent_of_cap === undefined
          ? { text: "over", value: "over", num: true }
          : { text: c.percent_of_cap + " %", value: c.percent_of_cap, num: true },
        { text: c.cap_source },
        { text: c.has_access ? "yes" : "no (over)", value: String(c.has_access) },
      ]),
    );
  }

  async function loadCaps() {
    const cap = await op("GetUsageConfig", { team_level: true });
    if (cap && cap.addOnCreditCap !== undefined) {
      setFigure("team-cap", cap.addOnCreditCap, fmt.format(cap.addOnCreditCap) + " credits");
    } else {
      setFigure("team-cap", "none", "no cap");
    }
  }

  async function loadBalance() {
    const b = await op("GetTeamCreditBalance", {});
    for (const k of ["promptCreditsPerSeat", "numSeats", "addOnCreditsAvailable", "addOnCreditsUsed"]) {
      setFigure(k, num(b[k]), fmt.format(num(b[k])));
    }
    const available = num(b.addOnCreditsAvailable);
    const used = num(b.addOnCreditsUsed);
    setFigure("addOnCreditsRemaining", available - used, fmt.format(available - used));
    if (available > 0) {
      // One decimal, truncated, as percent_of_cap is.
      const tenths = Math.trunc((used * 1000) / available);
      const pct = Math.trunc(tenths / 10) + "." + Math.abs(tenths % 10);
      setFigure("addOnCreditsPercent", pct, pct + " %");
    } else {
      setFigure("addOnCreditsPercent", "none", "no add-on credits");
    }
    const day = (s) => (s ? String(s).slice(0, 10) : "?");
    setFigure("billingCycle", day(b.billingCycleStart) + "/" + day(b.billingCycleEnd), day(b.billingCycleStart) + " to " + day(b.billingCycleEnd));
  }

  let generation = 0;

  async function load() {
    const mine = ++generation;
    let r;
    try {
      r = range();
    } catch (e) {
      setStatus(e.message, true);
      return;
    }
    if (!readKey()) {
      document.body.dataset.state = "locked";
      setStatus("Enter a service key to load the figures.");
      return;
    }
    document.body.dataset.state = "loading";
    setStatus("Loading " + r.start + " to " + r.end + (r.group ? " for group " + r.group : "") + "…");
    const days = daysOf(r.start, r.end);
    const parts = [
      ["analytics", loadAnalytics(r, days)],
      ["users", loadUsers(r)],
      ["credits", loadCredits()],
      ["caps", loadCaps()],
      ["balance", loadBalance()],
    ];
    const results = await Promise.allSettled(parts.map((p) => p[1]));
    if (mine !== generation) return;
    const failed = results
      .map((x, i) => [parts[i][0], x])
      .filter(([, x]) => x.status === "rejected");
    if (failed.some(([, x]) => x.reason && x.reason.status === 401)) {
      forgetKey();
      document.body.dataset.state = "error";
      setStatus("The service key was refused (unauthenticated); enter a valid key.", true);
      $("#key").focus();
      return;
    }
    if (failed.length) {
      document.body.dataset.state = "error";
      setStatus(
        "Some figures could not be loaded: " +
          failed.map(([name, x]) => name + " (" + (x.reason && x.reason.code) + ": " + (x.reason && x.reason.message) + ")").join("; "),
        true,
      );
      return;
    }
    document.body.dataset.state = "ready";
    setStatus("Showing " + r.start + " to " + r.end + (r.group ? " for group " + r.group : " for the whole team") + ".");
  }

  function init() {
    const today = new Date();
    $("#end").value = isoDay(today);
    $("#start").value = isoDay(new Date(today.getTime() - 29 * DAY_MS));
    $("#key-form").addEventListener("submit", (ev) => {
      ev.preventDefault();
      const input = $("#key");
      const key = input.value.trim();
      // The key leaves the field at once: it lives in sessionStorage only.
      input.value = "";
      if (!key) {
        setStatus("Enter a service key.", true);
        return;
      }
      storeKey(key);
      load();
    });
    $("#forget").addEventListener("click", () => {
      forgetKey();
      document.body.dataset.state = "locked";
      setStatus("The key is forgotten; enter one to load the figures.");
    });
    $("#range-form").addEventListener("submit", (ev) => {
      ev.preventDefault();
      load();
    });
    $("#table-users thead").addEventListener("click", onSort);
    if (readKey()) load();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
