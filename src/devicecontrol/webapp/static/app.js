// The pages' live part: one EventSource on the event stream of the page's controllers
// (the cookie session authenticates it; no token is ever in the page). The browser
// reconnects by itself after the network drops, resuming with Last-Event-ID. A stream the
// server refuses is asked why: too many open for the account (429) waits as long as the
// server says, says so, and opens again; anything else (the session ended) sends the page
// back through the log-in.

const RELOAD_AFTER_REFUSAL_MS = 3000;
const BUSY_WAIT_S = 15;  // when a 429 names no Retry-After
const READINGS_SHOWN = 10;  // as many as the page is drawn with
// a command's statuses only move forward: a row never goes back to an older one
const STATUS_RANK = { queued: 0, sent: 1, succeeded: 2, failed: 2, expired: 2 };

// a reading's fields as the server draws them (templating.reading_html): each name and
// value in a <bdi> of its own, so a device's bidirectional text turns only its own value
function describeReading(reading) {
  const fields = document.createDocumentFragment();
  Object.entries(reading).filter(([name]) => name !== "created").forEach(([name, value], i) => {
    if (i > 0) fields.append(" · ");
    const field = document.createElement("span");
    field.className = "field";
    const shownName = document.createElement("bdi");
    shownName.textContent = name;
    const shownValue = document.createElement("bdi");
    shownValue.textContent = String(value);
    field.append(shownName, " ", shownValue);
    fields.append(field);
  });
  return fields;
}

function addReading(root, reading) {
  const list = root.querySelector("#reading-rows");
  if (!list) return;
  if (!list.querySelector(".when")) list.replaceChildren();  // "no readings yet"
  const item = document.createElement("li");
  const when = document.createElement("span");
  when.className = "when";
  when.textContent = reading.created || "";
  item.append(when, " ", describeReading(reading));
  list.prepend(item);
  while (list.children.length > READINGS_SHOWN) list.lastElementChild.remove();
}

function follow(root) {
  const words = root.dataset;
  const status = root.querySelector("[role=status]");
  const say = (text) => { if (status) status.textContent = text || ""; };
  const holderOf = (serial) => root.querySelector(`[data-serial="${CSS.escape(serial)}"]`);
  const refresh = () => {
    if (words.rows && window.htmx) {
      window.htmx.ajax("GET", words.rows, { target: "#controller-rows", swap: "outerHTML" });
    }
  };
  const setField = (holder, field, shown, className) => {  // shown: text, or nodes
    const cell = holder.querySelector(`[data-field="${field}"]`);
    if (!cell) return;
    cell.replaceChildren(shown);
    if (className !== undefined) cell.className = className;
  };

  const handlers = {};  // each event's handler, given to every stream this page opens
  const open = (again) => {
    const source = new EventSource(words.stream);
    source.addEventListener("open", () => {
      say(words.textConnected);
      if (again) refresh();  // what happened while it waited
    });
    source.addEventListener("error", () => {
      if (source.readyState === EventSource.CLOSED) refused();
      else say(words.textReconnecting);
    });
    for (const [name, handle] of Object.entries(handlers)) source.addEventListener(name, handle);
  };
  const refused = async () => {
    const probe = new AbortController();
    let answer = null;
    try {
      answer = await fetch(words.stream, { signal: probe.signal, credentials: "same-origin" });
    } catch (_) { answer = null; }
    probe.abort();  // a stream that opened meanwhile is not kept
    if (answer && answer.status === 429) {
      const seconds = parseInt(answer.headers.get("Retry-After"), 10) || BUSY_WAIT_S;
      say((words.textBusy || "").replace("{seconds}", String(seconds)));
      setTimeout(() => open(true), seconds * 1000);
      return;
    }
    say(words.textEnded);
    setTimeout(() => window.location.reload(), RELOAD_AFTER_REFUSAL_MS);
  };
  handlers.online = (event) => {
    const data = JSON.parse(event.data);
    const holder = holderOf(data.serial_number);
    if (!holder) { refresh(); return; }  // claimed since the page was drawn
    const online = data.online === true;
    setField(holder, "online", online ? words.textOnline : words.textOffline, online ? "on" : "off");
  };
  handlers.reading = (event) => {
    const data = JSON.parse(event.data);
    const holder = holderOf(data.serial_number);
    if (!holder) { refresh(); return; }
    const fields = describeReading(data.reading);
    setField(holder, "reading", fields.childNodes.length ? fields : words.textNoReading);
    addReading(root, data.reading);
    chartReading(data.reading);
  };
  // each command's newest status the stream told: rows drawn by the server (a form's
  // answer, a refresh) may arrive after a newer event, and are brought forward once swapped
  const statuses = new Map();
  const showStatus = (id, status) => {
    const cell = root.querySelector(`[data-command="${CSS.escape(id)}"] [data-field="status"]`);
    if (!cell) return false;
    if ((STATUS_RANK[cell.dataset.status] ?? -1) >= STATUS_RANK[status]) return true;
    const key = "textStatus" + status.charAt(0).toUpperCase() + status.slice(1);
    cell.textContent = words[key] || status;
    cell.className = `status-${status}`;
    cell.dataset.status = status;
    return true;
  };
  document.body.addEventListener("htmx:afterSettle", () => {
    statuses.forEach((status, id) => showStatus(id, status));
  });
  handlers.command = (event) => {
    const command = JSON.parse(event.data).command;
    const known = statuses.get(command.id);
    if (!known || STATUS_RANK[command.status] > STATUS_RANK[known]) {
      statuses.set(command.id, command.status);
    }
    if (!showStatus(command.id, command.status) && words.commands && window.htmx) {
      // made elsewhere (the API, another browser): read the rows again
      window.htmx.ajax("GET", words.commands, { target: "#command-rows", swap: "outerHTML" });
    }
  };
  handlers.end = (event) => {
    const data = JSON.parse(event.data);
    if (words.leave) { window.location.assign(words.leave); return; }
    holderOf(data.serial_number)?.remove();
  };
  handlers.gap = refresh;  // events were missed: read the rows again
  open(false);
}

// Charts (uPlot, loaded by the pages that have one): drawn from the data the server put
// in the page, once the page's deferred scripts have run, and again after each swap.
const CHART_COLOURS = ["#0b5cad", "#a3261b", "#176b2c", "#7a4a00", "#5b3a8c", "#00687a"];
const CHART_HEIGHT = 220;
const charts = [];

function drawChart(holder, data = JSON.parse(holder.dataset.chart)) {
  holder.dataset.drawn = "true";
  const names = Object.keys(data.series);
  const bars = holder.dataset.bars === "true";
  const series = [{}, ...names.map((name, i) => {
    const colour = CHART_COLOURS[i % CHART_COLOURS.length];
    return bars
      ? { label: name, stroke: colour, fill: colour, paths: window.uPlot.paths.bars({ size: [0.6] }) }
      : { label: name, stroke: colour, width: 2, spanGaps: false };
  })];
  // the whole period on the x axis, however few points it has (and any live one after it)
  const range = () => [data.from, Math.max(data.to, data.x.length ? data.x[data.x.length - 1] : data.to)];
  const options = { width: holder.clientWidth || 320, height: CHART_HEIGHT, series,
    scales: { x: { time: true, range } } };
  const plot = new window.uPlot(options, [data.x, ...names.map((n) => data.series[n])], holder);
  charts.push({ holder, plot, names, data, live: holder.dataset.live === "true" });
}

function drawCharts() {
  if (!window.uPlot) return;
  for (let i = charts.length - 1; i >= 0; i--) {  // swapped out: forget them
    if (!charts[i].holder.isConnected) charts.splice(i, 1);
  }
  document.querySelectorAll("[data-chart]:not([data-drawn])").forEach((holder) => drawChart(holder));
}

const numeric = (value) => (Array.isArray(value) ? value.reduce((a, b) => a + b, 0) : value);

function chartReading(reading) {  // a live reading, added to the charts that follow them
  const at = Date.parse(reading.created.replace(" ", "T") + "Z") / 1000;
  for (const chart of charts.filter((c) => c.live && c.names.length === 0)) {
    // drawn empty: drawn again with the fields this first reading brings
    const names = Object.keys(reading).filter((n) => typeof numeric(reading[n]) === "number");
    if (names.length === 0) continue;
    chart.plot.destroy();
    charts.splice(charts.indexOf(chart), 1);
    chart.holder.parentElement.querySelector(".empty")?.remove();
    const series = Object.fromEntries(names.map((n) => [n, []]));
    drawChart(chart.holder, { ...chart.data, x: [], series });
  }
  for (const chart of charts.filter((c) => c.live)) {
    const values = chart.names.map((name) => numeric(reading[name]));
    if (values.every((v) => typeof v !== "number")) continue;
    chart.data.x.push(at);
    chart.names.forEach((name, i) => chart.data.series[name].push(values[i] ?? null));
    chart.plot.setData([chart.data.x, ...chart.names.map((n) => chart.data.series[n])]);
  }
}

window.addEventListener("resize", () => {
  for (const chart of charts) chart.plot.setSize({ width: chart.holder.clientWidth, height: CHART_HEIGHT });
});
// a request that got no answer at all (the network is down): said in words where its
// answer would have gone, never a page that silently does nothing
function showUnreachable(event) {
  const target = event.detail.target;
  if (!target) return;
  const message = document.createElement("p");
  message.className = "message alert";
  message.setAttribute("role", "alert");
  message.textContent = document.body.dataset.textUnreachable;
  target.replaceChildren(message);
}

document.addEventListener("DOMContentLoaded", () => {
  drawCharts();
  document.body.addEventListener("htmx:afterSettle", drawCharts);
  document.body.addEventListener("htmx:sendError", showUnreachable);
});

const live = document.querySelector("[data-stream]");
if (live) follow(live);
