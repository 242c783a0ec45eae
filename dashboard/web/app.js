// bulwark dashboard: reads a hystrix.stream (Server-Sent Events) and draws one
// tile per command and per bulkhead. Plain DOM, no framework, no network
// access besides the stream. Every name from the stream is put in the page
// with textContent or setAttribute, never parsed as HTML.
'use strict';

(function () {
  const HISTORY_MS = 120000; // sparkline span: two minutes
  const STALE_MS = 15000; // a tile not refreshed for this long is dimmed
  const SILENT_MS = 10000; // an open stream silent for this long is reopened
  const RETRY_MS = 2000; // wait before reopening a stream the browser gave up on
  const SVG = 'http://www.w3.org/2000/svg';

  const commands = new Map(); // group + "\u0000" + name -> command record
  const pools = new Map(); // group name -> pool record
  const queues = new Map(); // group name -> write queue record (BulwarkQueue)
  const ui = {
    sort: 'error',
    filter: '',
    controlURL: '', // the control endpoint; '' when the server offers none
    token: '', // the control token, once the endpoint accepted it (memory only)
  };

  // ---- stream URL -------------------------------------------------------

  function streamURL() {
    const params = new URLSearchParams(location.search);
    const meta = document.querySelector('meta[name="bulwark-stream"]');
    const base = params.get('stream') || (meta && meta.content) || 'hystrix.stream';
    const u = new URL(base, location.href);
    const delay = params.get('delay');
    if (delay) {
      u.searchParams.set('delay', delay);
    }
    return u.toString();
  }

  // ---- formatting -------------------------------------------------------

  function fmtInt(n) {
    return (Number(n) || 0).toLocaleString('en-US');
  }

  function fmtRate(r) {
    if (r >= 100) return r.toFixed(0);
    if (r >= 10) return r.toFixed(1);
    return r.toFixed(2);
  }

  function fmtPct(p) {
    return (Number(p) || 0).toFixed(p >= 10 || p === 0 ? 0 : 1) + '%';
  }

  function fmtDur(ms) {
    ms = Math.max(0, Number(ms) || 0);
    if (ms < 1000) return Math.round(ms) + 'ms';
    const s = Math.floor(ms / 1000);
    if (s < 60) return (ms / 1000).toFixed(s < 10 ? 1 : 0) + 's';
    const m = Math.floor(s / 60);
    if (m < 60) return m + 'm ' + String(s % 60).padStart(2, '0') + 's';
    const h = Math.floor(m / 60);
    return h + 'h ' + String(m % 60).padStart(2, '0') + 'm';
  }

  function fmtMs(ms) {
    return fmtInt(ms) + ' ms';
  }

  // ---- small DOM helpers ------------------------------------------------

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function svg(tag, attrs) {
    const e = document.createElementNS(SVG, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    return e;
  }

  function setText(e, text) {
    if (e.textContent !== text) e.textContent = text;
  }

  function setAttr(e, name, value) {
    if (e.getAttribute(name) !== value) e.setAttribute(name, value);
  }

  // ---- health and circuit -----------------------------------------------

  // health maps an error percentage (and an open circuit) to the four colours
  // of the Hystrix dashboard's scale (10 / 25 / 40 / 50 %).
  function health(errPct, open) {
    if (open || errPct >= 50) return 'red';
    if (errPct >= 25) return 'orange';
    if (errPct >= 10) return 'yellow';
    return 'green';
  }

  const STATE_LABEL = {
    closed: 'Closed',
    open: 'Open',
    'half-open': 'Half-Open',
    'forced-open': 'Forced Open',
    'forced-closed': 'Forced Closed',
    'observe-only': 'Observe-only',
  };

  // circuit returns the displayed state key of a breaker: the native event's
  // state and mode when present, else what a plain Hystrix event tells.
  function circuit(native, hystrix) {
    if (native) {
      if (native.mode === 'forced-open' || native.mode === 'forced-closed' || native.mode === 'observe-only') {
        return native.mode;
      }
      return native.state in STATE_LABEL ? native.state : 'closed';
    }
    if (!hystrix) return 'closed';
    if (hystrix.propertyValue_circuitBreakerForceOpen === true) return 'forced-open';
    if (hystrix.propertyValue_circuitBreakerForceClosed === true) return 'forced-closed';
    const open = hystrix.isCircuitBreakerOpen;
    return open === true || (typeof open === 'number' && open > 0) ? 'open' : 'closed';
  }

  function isOpenish(key) {
    return key === 'open' || key === 'forced-open' || key === 'half-open';
  }

  // circuitDetail tells how long the breaker has been in its state, its
  // remaining open time or half-open progress, and why it last tripped.
  function circuitDetail(n) {
    if (!n) return ['', '', ''];
    let since = 'for ' + fmtDur(n.timeInStateMs);
    if (n.mode === 'observe-only') since = 'would be ' + (STATE_LABEL[n.state] || n.state) + ' · ' + since;
    if (n.shared) since += ' · ' + n.shared;
    let progress = '';
    if (n.state === 'open' && n.mode === 'normal') {
      progress = 'retry in ' + fmtDur(n.retryAfterMs) + ' · open ' + fmtDur(n.openDurationMs);
    } else if (n.state === 'half-open') {
      progress = 'probes ' + n.probeSuccesses + '/' + n.probesNeeded + ' ok · ' + n.probes + ' in flight';
    } else if (n.rampShare < 1) {
      progress = 'ramping up: ' + Math.round(n.rampShare * 100) + '% admitted';
    }
    let trip = '';
    const ts = n.transitions || [];
    for (let i = ts.length - 1; i >= 0; i--) {
      if (ts[i].to === 'open' && ts[i].from === 'closed') {
        trip = 'last trip: ' + ts[i].reason + ', ' + fmtDur(n.currentTime - ts[i].at) + ' ago';
        break;
      }
    }
    if (!trip && n.reason) trip = 'last: ' + n.reason;
    return [since, progress, trip];
  }

  // policyDetail tells what the breaker's operating policies are doing:
  // a warm-up in progress, failed health checks while open.
  function policyDetail(n) {
    if (!n) return '';
    const parts = [];
    if (n.warmingUp) parts.push('warming up · ' + fmtDur(n.warmUpLeftMs) + ' left');
    if (n.healthCheck && n.state === 'open' && n.healthCheckFails > 0) {
      parts.push('health check failed ×' + n.healthCheckFails + (n.healthCheckError ? ': ' + n.healthCheckError : ''));
    }
    return parts.join(' · ');
  }

  // ---- commands ---------------------------------------------------------

  // The window's counters, in the Hystrix dashboard's colours. Cancelled,
  // Rate limited and Retried are bulwark's own (from the native event).
  // Rejected includes queue timeouts and rate-limit refusals, as the Hystrix
  // event counts them (the native event has them apart). Retried counts
  // attempts that failed and were tried again; each is also in Failure or
  // Timeout.
  const COUNTERS = [
    ['success', 'Success', (h) => h.rollingCountSuccess],
    ['failure', 'Failure', (h) => h.rollingCountFailure],
    ['timeout', 'Timeout', (h) => h.rollingCountTimeout],
    ['rejected', 'Rejected', (h) => h.rollingCountThreadPoolRejected + h.rollingCountSemaphoreRejected],
    ['short-circuited', 'Short-circuited', (h) => h.rollingCountShortCircuited],
    ['bad-request', 'Bad request', (h) => h.rollingCountBadRequests],
    ['fallback', 'Fallback', (h) => h.rollingCountFallbackSuccess],
    ['cancelled', 'Cancelled', (h, n) => (n ? n.rollingCountCancelled : 0)],
    ['rate-limited', 'Rate limited', (h, n) => (n ? n.rollingCountRateLimited : 0)],
    ['retried', 'Retried', (h, n) => (n ? n.rollingCountRetried : 0)],
  ];

  const PERCENTILES = [
    ['50', 'p50'],
    ['90', 'p90'],
    ['99', 'p99'],
    ['99.5', 'p99.5'],
    ['100', 'max'],
  ];

  // hostsOf is how many instances an event sums (an aggregated stream's
  // reportingHosts). The window, error %, and latencies of such an event
  // are per-host values times it, as Turbine sends them.
  function hostsOf(ev) {
    return Number(ev.reportingHosts) || 1;
  }

  function windowSeconds(ev) {
    const ms = Number(ev.propertyValue_metricsRollingStatisticalWindowInMilliseconds) / hostsOf(ev) || 10000;
    return ms / 1000;
  }

  // volume counts every call in the window, refused ones included, so an
  // open circuit still shows its traffic.
  function volume(h) {
    return (
      h.rollingCountSuccess +
      h.rollingCountFailure +
      h.rollingCountTimeout +
      h.rollingCountBadRequests +
      h.rollingCountShortCircuited +
      h.rollingCountThreadPoolRejected +
      h.rollingCountSemaphoreRejected
    );
  }

  function errorsOf(h) {
    return (
      h.rollingCountFailure +
      h.rollingCountTimeout +
      h.rollingCountShortCircuited +
      h.rollingCountThreadPoolRejected +
      h.rollingCountSemaphoreRejected
    );
  }

  function commandRecord(group, name) {
    const key = group + '\u0000' + name;
    let c = commands.get(key);
    if (!c) {
      c = { key, group, name, h: null, n: null, seen: 0, hist: [], rate: 0, err: 0, tile: null };
      commands.set(key, c);
    }
    return c;
  }

  function onHystrixCommand(ev, now) {
    const c = commandRecord(String(ev.group), String(ev.name));
    c.h = ev;
    c.seen = now;
    const hosts = hostsOf(ev);
    const secs = windowSeconds(ev);
    c.rate = volume(ev) / secs;
    c.err = Number(ev.errorPercentage) / hosts || 0;
    c.hist.push({ t: now, rate: c.rate, errs: errorsOf(ev) / secs });
    while (c.hist.length && c.hist[0].t < now - HISTORY_MS) c.hist.shift();
  }

  // onHistory puts the server's history of a command before the points the
  // page has seen itself, so the sparkline is full on open and on reload.
  function onHistory(ev) {
    const c = commandRecord(String(ev.group), String(ev.name));
    const first = c.hist.length ? c.hist[0].t : Infinity;
    const older = [];
    for (const p of ev.points || []) {
      if (Array.isArray(p) && p[0] < first) older.push({ t: Number(p[0]), rate: Number(p[1]) || 0, errs: Number(p[2]) || 0 });
    }
    c.hist = older.concat(c.hist);
  }

  function onBulwarkCommand(ev) {
    const c = commandRecord(String(ev.group), String(ev.name));
    c.n = ev;
  }

  function buildCommandTile(c) {
    const t = {};
    t.root = el('article', 'tile cmd');
    t.root.setAttribute('data-command', c.name);
    t.root.setAttribute('data-group', c.group);

    const head = el('div', 'head');
    t.chart = svg('svg', { class: 'chart', viewBox: '0 0 240 56', preserveAspectRatio: 'none' });
    t.area = svg('path', { class: 'area' });
    t.errLine = svg('path', { class: 'errline' });
    t.chart.append(t.area, t.errLine);
    t.dot = svg('svg', { class: 'dot', viewBox: '0 0 64 64' });
    t.circle = svg('circle', { cx: '32', cy: '32', r: '5' });
    t.dot.append(t.circle);
    const title = el('div', 'title');
    t.name = el('span', 'name', c.name);
    t.name.title = c.name;
    t.group = el('span', 'group', c.group);
    title.append(t.name, t.group);
    head.append(t.dot, title, t.chart);

    const main = el('div', 'main');
    const errBox = el('div', 'stat err');
    t.errPct = el('span', 'big errpct');
    errBox.append(t.errPct, el('small', '', 'errors'));
    const rateBox = el('div', 'stat rate');
    t.rate = el('span', 'big rateval');
    rateBox.append(t.rate, el('small', '', 'req/s'));
    const circ = el('div', 'circuit');
    t.state = el('span', 'state');
    t.groupState = el('span', 'groupstate');
    t.since = el('span', 'since');
    t.progress = el('span', 'progress');
    t.trip = el('span', 'trip');
    t.policy = el('span', 'policy');
    const stateLine = el('div', 'stateline');
    stateLine.append(t.groupState, t.state);
    circ.append(stateLine, t.since, t.progress, t.trip, t.policy);
    main.append(errBox, rateBox, circ);

    const counters = el('div', 'counters');
    t.counters = {};
    for (const [k, label] of COUNTERS) {
      const cell = el('div', 'counter c-' + k);
      cell.setAttribute('data-k', k);
      cell.title = label;
      const v = el('span', 'v', '0');
      cell.append(v, el('span', 'k', label));
      counters.append(cell);
      t.counters[k] = v;
    }

    const lat = el('div', 'latency');
    t.lat = {};
    for (const [k, label] of PERCENTILES) {
      const cell = el('div', 'pct');
      cell.setAttribute('data-p', label);
      const v = el('span', 'v', '0');
      cell.append(el('span', 'k', label), v);
      lat.append(cell);
      t.lat[k] = v;
    }
    const mean = el('div', 'pct');
    mean.setAttribute('data-p', 'mean');
    t.mean = el('span', 'v', '0');
    mean.append(el('span', 'k', 'mean'), t.mean);
    lat.append(mean);

    const foot = el('div', 'foot');
    t.degraded = el('span', 'degraded');
    t.slow = el('span', 'slow');
    t.inflight = el('span', 'inflight');
    t.detached = el('span', 'detached warn');
    t.timeout = el('span', 'timeout');
    t.hosts = el('span', 'hosts');
    foot.append(t.degraded, t.slow, t.inflight, t.detached, t.timeout, t.hosts);
    t.probes = el('span', 'probes');
    t.alert = el('span', 'alert warn');
    foot.append(t.probes, t.alert);

    t.root.append(head, main, counters, lat, foot);
    return t;
  }

  function sparkPath(hist, now, max, pick, close) {
    if (!hist.length) return '';
    const W = 240;
    const H = 56;
    const pts = hist.map((p) => {
      const x = W - ((now - p.t) / HISTORY_MS) * W;
      const y = H - 2 - (pick(p) / max) * (H - 6);
      return x.toFixed(1) + ',' + y.toFixed(1);
    });
    let d = 'M' + pts.join('L');
    if (close) {
      const x0 = (W - ((now - hist[0].t) / HISTORY_MS) * W).toFixed(1);
      d += 'L' + W + ',' + H + 'L' + x0 + ',' + H + 'Z';
    }
    return d;
  }

  function renderCommand(c, now) {
    if (!c.tile) c.tile = buildCommandTile(c);
    const t = c.tile;
    if (ui.token && !t.controls) {
      t.controls = controlRow(c.group, c.name);
      t.root.append(t.controls);
    }
    const h = c.h;
    const n = c.n;
    const key = circuit(n, h);
    const hue = health(c.err, isOpenish(key));

    setAttr(t.root, 'data-state', key);
    setAttr(t.root, 'data-health', hue);
    t.root.classList.toggle('stale', now - c.seen > STALE_MS);
    setText(t.state, STATE_LABEL[key]);
    setAttr(t.state, 'data-state', key);
    const [since, progress, trip] = circuitDetail(n);
    setText(t.since, since);
    setText(t.progress, progress);
    setText(t.trip, trip);
    setText(t.policy, policyDetail(n));
    setAttr(t.root, 'data-warming', n && n.warmingUp ? 'true' : '');
    if (n && n.groupState && (n.groupState !== 'closed' || n.groupMode === 'forced-open')) {
      setText(t.groupState, 'group ' + (STATE_LABEL[n.groupMode === 'forced-open' ? 'forced-open' : n.groupState] || n.groupState));
    } else {
      setText(t.groupState, '');
    }

    // Circle: area grows with the rate (square-root scale up to 400/s), colour with health.
    const r = 5 + 25 * Math.sqrt(Math.min(c.rate, 400) / 400);
    setAttr(t.circle, 'r', r.toFixed(1));
    setAttr(t.circle, 'class', 'h-' + hue);

    setText(t.errPct, fmtPct(c.err));
    setAttr(t.errPct, 'class', 'big errpct h-' + hue);
    setText(t.rate, fmtRate(c.rate));

    if (h) {
      for (const [k, , get] of COUNTERS) setText(t.counters[k], fmtInt(get(h, n)));
      const hosts = hostsOf(h);
      for (const [k] of PERCENTILES) setText(t.lat[k], fmtMs(Math.floor(((h.latencyExecute || {})[k] || 0) / hosts)));
      setText(t.mean, fmtMs(Math.floor((h.latencyExecute_mean || 0) / hosts)));
      setText(t.hosts, hosts > 1 ? fmtInt(hosts) + ' hosts' : '');
      setText(t.timeout, 'timeout ' + fmtMs(h.propertyValue_executionTimeoutInMilliseconds));
      t.counters.fallback.parentNode.title =
        'fallback failures ' + fmtInt(h.rollingCountFallbackFailure) +
        ', rejected ' + fmtInt(h.rollingCountFallbackRejection) +
        ', missing ' + fmtInt(h.rollingCountFallbackMissing);
    }
    if (n) {
      setText(t.degraded, 'degraded ' + fmtPct(n.degradedRate * 100));
      setText(t.slow, 'slow ' + fmtPct(n.slowRatio * 100));
      setText(t.inflight, 'in flight ' + fmtInt(n.inFlight));
      setText(t.detached, n.detached > 0 ? 'detached ' + fmtInt(n.detached) : '');
      t.degraded.classList.toggle('warn', n.degradedRate > 0);
      t.slow.classList.toggle('warn', n.slowRatio > 0);
      setText(t.probes, n.rollingCountProbe > 0
        ? 'probes ' + fmtInt(n.rollingCountProbe) + ' (' + fmtInt(n.rollingCountProbeSuccess) + ' ok, ' +
          fmtInt(n.rollingCountProbeFailure) + ' failed)'
        : '');
      const alerts = [];
      if (n.alertTier) alerts.push('alert ' + n.alertTier);
      if (n.degradedAlarm) alerts.push('degraded alarm');
      setText(t.alert, alerts.join(' · '));
      setAttr(t.alert, 'data-tier', n.alertTier || '');
    } else if (h) {
      setText(t.inflight, 'in flight ' + fmtInt(h.currentConcurrentExecutionCount));
    }

    let max = 1;
    for (const p of c.hist) max = Math.max(max, p.rate);
    setAttr(t.area, 'd', sparkPath(c.hist, now, max, (p) => p.rate, true));
    setAttr(t.errLine, 'd', sparkPath(c.hist, now, max, (p) => p.errs, false));
  }

  // ---- bulkheads --------------------------------------------------------

  function poolRecord(name) {
    let p = pools.get(name);
    if (!p) {
      p = { name, h: null, n: null, seen: 0, tile: null, rate: 0 };
      pools.set(name, p);
    }
    return p;
  }

  const POOL_FIELDS = [
    ['active', 'Active'],
    ['queued', 'Queued'],
    ['size', 'Size'],
    ['largest', 'Largest'],
    ['rejected', 'Rejected'],
    ['detached', 'Detached'],
    ['executed', 'Executed/s'],
    ['completed', 'Completed'],
  ];

  function buildPoolTile(p) {
    const t = {};
    t.root = el('article', 'tile pool');
    t.root.setAttribute('data-pool', p.name);
    const title = el('div', 'title');
    t.name = el('span', 'name', p.name);
    t.name.title = p.name;
    t.strategy = el('span', 'badge strategy');
    title.append(t.name, t.strategy);
    const gauge = el('div', 'gauge');
    t.fill = el('div', 'fill');
    t.queueFill = el('div', 'qfill');
    gauge.append(t.fill, t.queueFill);
    const grid = el('div', 'fields');
    t.f = {};
    for (const [k, label] of POOL_FIELDS) {
      const cell = el('div', 'field ' + k);
      cell.setAttribute('data-k', k);
      const v = el('span', 'v', '0');
      cell.append(v, el('span', 'k', label));
      grid.append(cell);
      t.f[k] = v;
    }
    const circ = el('div', 'circuit');
    t.state = el('span', 'state');
    t.since = el('span', 'since');
    t.policy = el('span', 'policy');
    circ.append(el('span', 'k', 'group breaker'), t.state, t.since, t.policy);
    t.config = el('div', 'config');
    t.root.append(title, gauge, grid, circ, t.config);
    return t;
  }

  function renderPool(p, now) {
    if (!p.tile) p.tile = buildPoolTile(p);
    const t = p.tile;
    const h = p.h;
    const n = p.n;
    const v = {};
    if (n) {
      v.strategy = n.strategy;
      v.active = n.active;
      v.queued = n.queued;
      v.size = n.capacity;
      v.queueCap = n.queueCapacity;
      v.largest = n.largestActive;
      v.rejected = n.rollingRejected;
      v.detached = n.detached;
      v.completed = n.completed;
      v.executed = n.rollingExecuted / ((n.windowMs || 10000) / 1000);
    }
    if (h) {
      v.strategy = v.strategy || 'THREAD';
      v.active = h.currentActiveCount;
      v.queued = h.currentQueueSize;
      v.size = h.currentMaximumPoolSize;
      v.queueCap = h.propertyValue_queueSizeRejectionThreshold;
      v.largest = h.currentLargestPoolSize;
      v.rejected = h.rollingCountCommandRejections;
      v.completed = h.currentCompletedTaskCount;
      v.executed = h.rollingCountThreadsExecuted / windowSeconds(h);
    }
    setText(t.strategy, v.strategy || '');
    setAttr(t.root, 'data-strategy', v.strategy || '');
    t.root.classList.toggle('stale', now - p.seen > STALE_MS);
    setText(t.f.active, fmtInt(v.active));
    setText(t.f.queued, v.queueCap ? fmtInt(v.queued) + ' / ' + fmtInt(v.queueCap) : fmtInt(v.queued));
    setText(t.f.size, fmtInt(v.size));
    setText(t.f.largest, fmtInt(v.largest));
    setText(t.f.rejected, fmtInt(v.rejected));
    setText(t.f.detached, v.detached === undefined ? '–' : fmtInt(v.detached));
    setText(t.f.executed, fmtRate(v.executed || 0));
    setText(t.f.completed, fmtInt(v.completed));
    t.f.rejected.parentNode.classList.toggle('warn', v.rejected > 0);
    t.f.detached.parentNode.classList.toggle('warn', v.detached > 0);
    const size = Math.max(1, Number(v.size) || 0);
    t.fill.style.width = Math.min(100, (100 * (Number(v.active) || 0)) / size).toFixed(1) + '%';
    const qcap = Number(v.queueCap) || 0;
    t.queueFill.style.width = qcap ? Math.min(100, (100 * (Number(v.queued) || 0)) / qcap).toFixed(1) + '%' : '0%';
    const full = (Number(v.active) || 0) >= size;
    t.root.classList.toggle('full', full);
    const key = circuit(n, null);
    setText(t.state, n ? STATE_LABEL[key] : '–');
    setAttr(t.state, 'data-state', n ? key : '');
    setText(t.since, n ? circuitDetail(n).slice(0, 2).filter(Boolean).join(' · ') : '');
    setText(t.policy, policyDetail(n));
    setText(t.config, n && n.configGeneration !== undefined
      ? 'config gen ' + fmtInt(n.configGeneration) + ' · changed ' + fmtDur(n.configAgeMs) + ' ago' : '');
    if (ui.token && !t.controls) {
      t.controls = controlRow(p.name, '');
      t.root.append(t.controls);
    }
  }

  // ---- controls (only with a control endpoint and its token) -------------

  const ACTIONS = [
    ['force-open', 'Force open'],
    ['force-closed', 'Force closed'],
    ['normal', 'Normal'],
    ['reset', 'Reset'],
  ];

  function controlRow(group, command) {
    const row = el('div', 'controls');
    for (const [action, label] of ACTIONS) {
      const b = el('button', 'control', label);
      b.type = 'button';
      b.setAttribute('data-action', action);
      b.addEventListener('click', () => control({ action, group, command }));
      row.append(b);
    }
    return row;
  }

  function setControlStatus(text, bad) {
    const s = document.getElementById('control-status');
    setText(s, text);
    s.classList.toggle('bad', !!bad);
  }

  async function control(req, token) {
    token = token || ui.token;
    let res;
    try {
      res = await fetch(ui.controlURL, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'X-Bulwark-Token': token },
        body: JSON.stringify(req),
        credentials: 'omit',
      });
    } catch (e) {
      setControlStatus('control: ' + e.message, true);
      return false;
    }
    if (!res.ok) {
      setControlStatus('control: ' + res.status + ' ' + (await res.text()).trim(), true);
      return false;
    }
    const what = req.action === 'apply-rules' ? 'rules applied'
      : req.action + ' ' + req.group + (req.command ? '/' + req.command : '');
    setControlStatus(req.action === 'check' ? 'controls unlocked' : what, false);
    return true;
  }

  function setupControls() {
    const meta = document.querySelector('meta[name="bulwark-control"]');
    if (!meta || !meta.content) return;
    ui.controlURL = new URL(meta.content, location.href).toString();
    const box = document.getElementById('control');
    box.hidden = false;
    const input = document.getElementById('control-token');
    const unlock = async () => {
      if (await control({ action: 'check' }, input.value)) {
        ui.token = input.value;
        input.value = '';
        document.body.classList.add('controlled');
        document.getElementById('rules').hidden = false;
        render();
      }
    };
    document.getElementById('control-unlock').addEventListener('click', unlock);
    input.addEventListener('keydown', (e) => {
      if (e.key === 'Enter') unlock();
    });
    document.getElementById('rules-apply').addEventListener('click', () => {
      let doc;
      try {
        doc = JSON.parse(document.getElementById('rules-doc').value);
      } catch (e) {
        setControlStatus('rules: ' + e.message, true);
        return;
      }
      control({ action: 'apply-rules', rules: doc });
    });
  }

  // ---- ordering, filtering and the render loop --------------------------

  function matches(filter, ...names) {
    if (!filter) return true;
    return names.some((s) => s.toLowerCase().includes(filter));
  }

  function byName(a, b) {
    return a.name.localeCompare(b.name) || a.group.localeCompare(b.group);
  }

  function sortCommands(list) {
    switch (ui.sort) {
      case 'volume':
        return list.sort((a, b) => b.rate - a.rate || byName(a, b));
      case 'name':
        return list.sort(byName);
      default:
        return list.sort((a, b) => b.err - a.err || b.rate - a.rate || byName(a, b));
    }
  }

  // place puts the tiles in order, moving only those out of place, and
  // hides the ones the filter leaves out.
  function place(container, items, shown) {
    let i = 0;
    for (const it of items) {
      const node = it.tile.root;
      node.hidden = !shown(it);
      if (container.children[i] !== node) container.insertBefore(node, container.children[i] || null);
      i++;
    }
  }

  let pending = false;
  function schedule() {
    if (pending) return;
    pending = true;
    setTimeout(render, 40);
  }

  function render() {
    pending = false;
    const now = Date.now();
    const f = ui.filter;

    const cmds = Array.from(commands.values()).filter((c) => c.h || c.n);
    for (const c of cmds) renderCommand(c, now);
    sortCommands(cmds);
    const cmdShown = (c) => matches(f, c.name, c.group);
    place(document.getElementById('commands'), cmds, cmdShown);
    const nCmd = cmds.filter(cmdShown).length;
    setText(document.getElementById('cmd-count'), cmds.length ? nCmd + ' of ' + cmds.length : '');
    document.getElementById('cmd-empty').hidden = cmds.length > 0;

    const ps = Array.from(pools.values()).sort((a, b) => a.name.localeCompare(b.name));
    for (const p of ps) renderPool(p, now);
    const poolShown = (p) => matches(f, p.name);
    place(document.getElementById('pools'), ps, poolShown);
    const nPool = ps.filter(poolShown).length;
    setText(document.getElementById('pool-count'), ps.length ? nPool + ' of ' + ps.length : '');
    document.getElementById('pool-empty').hidden = ps.length > 0;

    const qs = Array.from(queues.values()).sort((a, b) => a.name.localeCompare(b.name));
    for (const q of qs) renderQueue(q, now);
    place(document.getElementById('queues'), qs, (q) => matches(f, q.name));
    document.getElementById('queue-panel').hidden = qs.length === 0;
  }

  // ---- write queues (BulwarkQueue events of the durable module) ----------

  const QUEUE_FIELDS = [
    ['backlog', 'Backlog'],
    ['oldestAgeMs', 'Oldest'],
    ['replayed', 'Replayed'],
    ['deadLettered', 'Dead-lettered'],
    ['deadLetters', 'Dead letters'],
  ];

  function renderQueue(q, now) {
    if (!q.tile) {
      const t = { f: {} };
      t.root = el('article', 'tile queue');
      t.root.setAttribute('data-queue', q.name);
      const title = el('div', 'title');
      const name = el('span', 'name', q.name);
      name.title = q.name;
      title.append(name);
      const grid = el('div', 'fields');
      for (const [k, label] of QUEUE_FIELDS) {
        const cell = el('div', 'field ' + k);
        cell.setAttribute('data-k', k);
        t.f[k] = el('span', 'v', '0');
        cell.append(t.f[k], el('span', 'k', label));
        grid.append(cell);
      }
      t.root.append(title, grid);
      q.tile = t;
    }
    const t = q.tile;
    const ev = q.ev;
    for (const [k] of QUEUE_FIELDS) {
      setText(t.f[k], k === 'oldestAgeMs' ? fmtDur(Number(ev[k]) || 0) : fmtInt(Number(ev[k]) || 0));
    }
    t.root.classList.toggle('stale', now - q.seen > STALE_MS);
  }

  // ---- the stream -------------------------------------------------------

  function onEvent(ev, now) {
    if (!ev || typeof ev !== 'object') return;
    switch (ev.type) {
      case 'HystrixCommand':
        onHystrixCommand(ev, now);
        break;
      case 'BulwarkCommand':
        onBulwarkCommand(ev);
        break;
      case 'BulwarkHistory':
        onHistory(ev);
        break;
      case 'HystrixThreadPool': {
        const p = poolRecord(String(ev.name));
        p.h = ev;
        p.seen = now;
        break;
      }
      case 'BulwarkQueue': {
        const name = String(ev.name);
        const q = queues.get(name) || { name, tile: null };
        q.ev = ev;
        q.seen = now;
        queues.set(name, q);
        break;
      }
      case 'BulwarkGroup': {
        const p = poolRecord(String(ev.name));
        p.n = ev;
        p.seen = now;
        break;
      }
      default:
        return;
    }
    schedule();
  }

  const conn = {
    es: null,
    last: 0,
    retry: null,
    everOpen: false,
  };

  function setConn(state, text) {
    const b = document.getElementById('conn');
    setAttr(b, 'data-conn', state);
    b.className = 'badge conn ' + state;
    setText(b, text);
  }

  function connect(url) {
    if (conn.es) conn.es.close();
    clearTimeout(conn.retry);
    setConn(conn.everOpen ? 'reconnecting' : 'connecting', conn.everOpen ? 'reconnecting…' : 'connecting…');
    const es = new EventSource(url);
    conn.es = es;
    conn.last = Date.now();
    es.onopen = () => {
      conn.everOpen = true;
      conn.last = Date.now();
      setConn('live', 'live');
    };
    es.onmessage = (m) => {
      conn.last = Date.now();
      let ev;
      try {
        ev = JSON.parse(m.data);
      } catch (e) {
        return;
      }
      onEvent(ev, conn.last);
    };
    es.onerror = () => {
      conn.everOpen = true;
      setConn('reconnecting', 'reconnecting…');
      // EventSource retries by itself after a dropped connection, but gives
      // up for good after an HTTP error (such as 503 past the cap).
      if (es.readyState === EventSource.CLOSED) {
        conn.retry = setTimeout(() => connect(url), RETRY_MS);
      }
    };
  }

  function start() {
    const params = new URLSearchParams(location.search);
    const sortSel = document.getElementById('sort');
    const filterBox = document.getElementById('filter');
    if (['error', 'volume', 'name'].includes(params.get('sort'))) ui.sort = params.get('sort');
    sortSel.value = ui.sort;
    if (params.get('filter')) {
      filterBox.value = params.get('filter');
      ui.filter = filterBox.value.trim().toLowerCase();
    }
    sortSel.addEventListener('change', () => {
      ui.sort = sortSel.value;
      render();
    });
    filterBox.addEventListener('input', () => {
      ui.filter = filterBox.value.trim().toLowerCase();
      render();
    });

    setupControls();
    const url = streamURL();
    setText(document.getElementById('source'), url);
    connect(url);
    // Watchdog: a stream that stays open but silent (a proxy holding a dead
    // connection) is reopened; the tiles' clocks and staleness are redrawn.
    setInterval(() => {
      if (conn.es && conn.es.readyState === EventSource.OPEN && Date.now() - conn.last > SILENT_MS) {
        connect(url);
      }
      schedule();
    }, 1000);
  }

  if (document.readyState === 'loading') {
    document.addEventListener('DOMContentLoaded', start);
  } else {
    start();
  }
})();
