// The pages' live part: one EventSource on the event stream of the page's controllers
// (the cookie session authenticates it; no token is ever in the page). The browser
// reconnects by itself after the network drops, resuming with Last-Event-ID; a stream the
// server refuses (the session ended) sends the page back through the log-in.

const RELOAD_AFTER_REFUSAL_MS = 3000;

function describeReading(reading) {
  return Object.entries(reading)
    .filter(([name]) => name !== "created")
    .map(([name, value]) => `${name} ${value}`)
    .join(" · ");
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
  const setField = (holder, field, text, className) => {
    const cell = holder.querySelector(`[data-field="${field}"]`);
    if (!cell) return;
    cell.textContent = text;
    if (className !== undefined) cell.className = className;
  };

  const source = new EventSource(words.stream);
  source.addEventListener("open", () => say(words.textConnected));
  source.addEventListener("error", () => {
    if (source.readyState === EventSource.CLOSED) {
      say(words.textEnded);
      setTimeout(() => window.location.reload(), RELOAD_AFTER_REFUSAL_MS);
    } else {
      say(words.textReconnecting);
    }
  });
  source.addEventListener("online", (event) => {
    const data = JSON.parse(event.data);
    const holder = holderOf(data.serial_number);
    if (!holder) { refresh(); return; }  // claimed since the page was drawn
    const online = data.online === true;
    setField(holder, "online", online ? words.textOnline : words.textOffline, online ? "on" : "off");
  });
  source.addEventListener("reading", (event) => {
    const data = JSON.parse(event.data);
    const holder = holderOf(data.serial_number);
    if (!holder) { refresh(); return; }
    setField(holder, "reading", describeReading(data.reading) || words.textNoReading);
  });
  source.addEventListener("end", (event) => {
    const data = JSON.parse(event.data);
    if (words.leave) { window.location.assign(words.leave); return; }
    holderOf(data.serial_number)?.remove();
  });
  source.addEventListener("gap", refresh);  // events were missed: read the rows again
}

const live = document.querySelector("[data-stream]");
if (live) follow(live);
