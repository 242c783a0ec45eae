// bulwark dashboard: reads a hystrix.stream (Server-Sent Events) and shows
// one tile, or one table row, per command and one tile per bulkhead. Plain
// DOM, no framework, no network access besides the stream. Every name from
// the stream is put in the page with textContent or setAttribute, never
// parsed as HTML.
//
// Built for hundreds of commands: the page draws once per frame of the
// stream, only the commands whose events changed and only the tiles and
// rows on screen, writes to the DOM only the texts that differ, animates
// nothing that would be laid out again, and reorders only when a state
// changes or a sorted value moves past its noise, so a steady service
// keeps its order.
'use strict';

(function () {
  const HISTORY_MS = 120000; // sparkline span: two minutes
  const STALE_MS = 15000; // a tile not refreshed for this long is dimmed
  const SILENT_MS = 10000; // an open stream silent for this long is reopened
  const RETRY_MS = 2000; // wait before reopening a stream that ended or failed
  const FLUSH_MS = 250; // the longest a change waits to be drawn
  const SVG = 'http://www.w3.org/2000/svg';
  const NO_DATA = '–';

  const commands = new Map(); // group + "\u0000" + name -> command record
  const pools = new Map(); // group name -> pool record
  const queues = new Map(); // group name -> write queue record (BulwarkQueue)
  const sections = new Map(); // group name -> its section in each view
  const ui = {
    view: 'tiles', // 'tiles' or 'table'
    sort: 'error', // a key of SORTS
    desc: true,
    filter: '',
    state: 'all', // a key of STATE_FILTERS
    grouped: false,
    collapsed: new Set(), // groups folded away
    controlURL: '', // the control endpoint; '' when the server offers none
    token: '', // the control token, once the endpoint accepted it (memory only)
  };
  let reorder = true; // the order must be computed again
  let columnsKey = ''; // the table's columns as last laid out
  let hiddenColumns = new Set(); // the keys of the table's columns not shown

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

  // One formatter for every number: toLocaleString builds one per call,
  // which with hundreds of commands costs most of a frame.
  const INT = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });

  function fmtInt(n) {
    return INT.format(Number(n) || 0);
  }

  // fmtCount keeps a counter short: exact below 100,000, then 123k, 1.23M.
  function fmtCount(n) {
    n = Number(n) || 0;
    if (n < 1e5) return fmtInt(n);
    if (n < 1e6) return Math.floor(n / 1e3) + 'k';
    if (n < 1e9) return (n / 1e6).toFixed(n < 1e7 ? 2 : 1) + 'M';
    return (n / 1e9).toFixed(1) + 'G';
  }

  function fmtRate(r) {
    if (r >= 1000) return fmtCount(Math.round(r));
    if (r >= 100) return r.toFixed(0);
    if (r >= 10) return r.toFixed(1);
    return r.toFixed(2);
  }

  function fmtPct(p) {
    if (p === null) return NO_DATA;
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
    if (h < 48) return h + 'h ' + String(m % 60).padStart(2, '0') + 'm';
    return Math.floor(h / 24) + 'd ' + String(h % 24).padStart(2, '0') + 'h';
  }

  function fmtMs(ms) {
    return fmtInt(ms) + ' ms';
  }

  // fmtLatency keeps a latency short: 850 ms, 1.25 s, 12.5 s, 2.5 min.
  function fmtLatency(ms) {
    if (ms === null) return NO_DATA;
    if (ms < 1000) return ms + ' ms';
    if (ms < 10000) return (ms / 1000).toFixed(2) + ' s';
    if (ms < 60000) return (ms / 1000).toFixed(1) + ' s';
    if (ms < 6e5) return (ms / 60000).toFixed(1) + ' min';
    if (ms < 6e6) return Math.round(ms / 60000) + ' min';
    return fmtDur(ms);
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

  // setText and setAttr write only what changed; they remember the last
  // value on the element, so a frame reads nothing back from the DOM.
  function setText(e, text) {
    if (e._text !== text) {
      e._text = text;
      e.textContent = text;
    }
  }

  function setAttr(e, name, value) {
    const k = '_a_' + name;
    if (e[k] !== value) {
      e[k] = value;
      e.setAttribute(name, value);
    }
  }

  function setHidden(e, hidden) {
    if (e._hidden !== hidden) {
      e._hidden = hidden;
      e.hidden = hidden;
    }
  }

  function setClass(e, cls, on) {
    const k = '_c_' + cls;
    if (e[k] !== on) {
      e[k] = on;
      e.classList.toggle(cls, on);
    }
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

  // groupKey is the state of the group's breaker when it refuses calls
  // (open, half-open, forced open), else ''.
  function groupKey(n) {
    if (!n || !n.groupState) return '';
    if (n.groupMode === 'forced-open') return 'forced-open';
    if (n.groupMode === 'normal' || !n.groupMode) {
      if (n.groupState === 'open' || n.groupState === 'half-open') return n.groupState;
    }
    return '';
  }

  // severity orders breaker states, worst first: refusing calls (open,
  // forced open), probing (half-open), overridden by hand (forced closed,
  // observe-only), closed.
  function severity(key, group) {
    if (key === 'open' || key === 'forced-open' || group === 'open' || group === 'forced-open') return 3;
    if (key === 'half-open' || group === 'half-open') return 2;
    if (key === 'forced-closed' || key === 'observe-only') return 1;
    return 0;
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
  // a warm-up in progress, the health checker's line while open.
  function policyDetail(n) {
    if (!n) return '';
    const parts = [];
    if (n.warmingUp) parts.push('warming up · ' + fmtDur(n.warmUpLeftMs) + ' left');
    if (n.healthCheck && n.state === 'open') parts.push('health check: ' + n.healthCheck);
    // The confidence rule: the breaker trips on the ratios' lower bounds.
    if (n.confidence > 0) {
      parts.push('errors ≥ ' + fmtPct(n.errorBound * 100) + ' at ' + fmtPct(n.confidence * 100) + ' confidence');
    }
    return parts.join(' · ');
  }

  // ---- commands ---------------------------------------------------------

  // The window's counters, in the Hystrix dashboard's colours. Cancelled,
  // Rate limited, Retried, Coalesced, Throttled, Shed and Hedged are bulwark's own
  // (from the native event). Rejected includes queue timeouts, rate-limit
  // and throttle refusals and priority shedding (Shed), as the Hystrix event
  // counts them (the native event has them apart). Retried counts
  // attempts that failed and were tried again; each is also in Failure or
  // Timeout. Coalesced counts calls that shared another call's Run. Hedged
  // counts the attempts of hedged calls whose answer no caller took.
  //
  // The third entry tells whether the command uses the feature the counter
  // counts (null: always shown). The stream says so for timeouts and
  // breakers; for the others a count above zero shows the feature is on.
  // A counter once shown stays for the life of the page, so tiles and
  // columns do not come and go as counts fall back to zero.
  const COUNTERS = [
    ['success', 'Success', null, (h) => h.rollingCountSuccess],
    ['failure', 'Failure', null, (h) => h.rollingCountFailure],
    ['timeout', 'Timeout', (h, n) => timeoutOf(h, n) > 0, (h) => h.rollingCountTimeout],
    ['rejected', 'Rejected', null, (h) => h.rollingCountThreadPoolRejected + h.rollingCountSemaphoreRejected],
    ['short-circuited', 'Short-circuited', (h) => h.propertyValue_circuitBreakerEnabled !== false,
      (h) => h.rollingCountShortCircuited],
    ['bad-request', 'Bad request', () => false, (h) => h.rollingCountBadRequests],
    ['fallback', 'Fallback',
      (h) => h.rollingCountFallbackFailure + h.rollingCountFallbackRejection > 0,
      (h) => h.rollingCountFallbackSuccess],
    ['cancelled', 'Cancelled', () => false, (h, n) => (n ? n.rollingCountCancelled : 0)],
    ['rate-limited', 'Rate limited', () => false, (h, n) => (n ? n.rollingCountRateLimited : 0)],
    ['retried', 'Retried', () => false, (h, n) => (n ? n.rollingCountRetried : 0)],
    ['read-only', 'Read-only', () => false, (h, n) => (n ? n.rollingCountReadOnly : 0)],
    ['degraded-static', 'Degraded: static', () => false, (h, n) => (n ? n.rollingCountDegradedStatic : 0)],
    ['degraded-last-good', 'Degraded: last good', () => false, (h, n) => (n ? n.rollingCountDegradedLastGood : 0)],
    ['degraded-feature-off', 'Degraded: feature off', () => false,
      (h, n) => (n ? n.rollingCountDegradedFeatureOff : 0)],
    ['degraded-deferred', 'Degraded: deferred', () => false, (h, n) => (n ? n.rollingCountDegradedDeferred : 0)],
    ['coalesced', 'Coalesced', () => false, (h, n) => (n ? n.rollingCountCoalesced : 0)],
    ['throttled', 'Throttled', () => false, (h, n) => (n ? n.rollingCountThrottled : 0)],
    ['priority-rejected', 'Shed', () => false, (h, n) => (n ? n.rollingCountPriorityRejected : 0)],
    ['hedged', 'Hedged', () => false, (h, n) => (n ? n.rollingCountHedged : 0)],
  ];

  const PERCENTILES = [
    ['50', 'p50'],
    ['90', 'p90'],
    ['99', 'p99'],
    ['99.5', 'p99.5'],
    ['100', 'max'],
  ];

  function timeoutOf(h, n) {
    if (n && n.timeoutMs !== undefined) return Number(n.timeoutMs) || 0;
    return h ? Number(h.propertyValue_executionTimeoutInMilliseconds) || 0 : 0;
  }

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

  // ran counts the window's calls that ran, the ones latencies are of.
  function ran(h) {
    return h.rollingCountSuccess + h.rollingCountFailure + h.rollingCountTimeout + h.rollingCountBadRequests;
  }

  function commandRecord(group, name) {
    const key = group + '\u0000' + name;
    let c = commands.get(key);
    if (!c) {
      c = {
        key, group, name, h: null, n: null, seen: 0, hist: [], ver: 0,
        calls: 0, secs: 10, rate: 0, requests: 0, err: null, lat: {}, mean: null, sev: 0, hue: 'green', stateKey: 'closed', groupKey: '',
        features: new Set(), rank: {}, tile: null, row: null,
      };
      commands.set(key, c);
      reorder = true;
    }
    return c;
  }

  function prune(hist, now) {
    let i = 0;
    while (i < hist.length && hist[i].t < now - HISTORY_MS) i++;
    if (i) hist.splice(0, i);
  }

  function onHystrixCommand(ev, now) {
    const c = commandRecord(String(ev.group), String(ev.name));
    c.h = ev;
    c.seen = now;
    c.ver++;
    const hosts = hostsOf(ev);
    const secs = windowSeconds(ev);
    c.calls = volume(ev);
    c.secs = secs;
    c.rate = c.calls / secs;
    c.requests = Number(ev.requestCount) || 0;
    c.err = c.requests > 0 ? Number(ev.errorPercentage) / hosts || 0 : null;
    const lat = ev.latencyExecute || {};
    const any = ran(ev) > 0;
    for (const [k] of PERCENTILES) c.lat[k] = any ? Math.floor((Number(lat[k]) || 0) / hosts) : null;
    c.mean = any ? Math.floor((Number(ev.latencyExecute_mean) || 0) / hosts) : null;
    c.hist.push({ t: now, rate: c.rate, errs: errorsOf(ev) / secs });
    prune(c.hist, now);
  }

  // onHistory puts the server's history of a command before the points the
  // page has seen itself, so the sparkline is full on open and on reload.
  function onHistory(ev, now) {
    const c = commandRecord(String(ev.group), String(ev.name));
    const first = c.hist.length ? c.hist[0].t : Infinity;
    const older = [];
    for (const p of ev.points || []) {
      if (Array.isArray(p) && p[0] < first && p[0] >= now - HISTORY_MS) {
        older.push({ t: Number(p[0]), rate: Number(p[1]) || 0, errs: Number(p[2]) || 0 });
      }
    }
    c.hist = older.concat(c.hist);
    c.ver++;
  }

  function onBulwarkCommand(ev) {
    const c = commandRecord(String(ev.group), String(ev.name));
    c.n = ev;
    c.ver++;
  }

  const seenFeatures = new Set(); // counters shown by at least one command

  // derive computes what the views show of c and every ordering needs:
  // its state and health, the features seen on, the latched counters.
  function derive(c) {
    const h = c.h;
    const n = c.n;
    c.stateKey = circuit(n, h);
    c.groupKey = groupKey(n);
    c.sev = severity(c.stateKey, c.groupKey);
    c.hue = health(c.err || 0, isOpenish(c.stateKey) || c.groupKey !== '');
    if (!h) return;
    for (const [k, , on, get] of COUNTERS) {
      if (c.features.has(k)) continue;
      if (on === null || on(h, n) || get(h, n) > 0) {
        c.features.add(k);
        seenFeatures.add(k);
      }
    }
  }

  // ---- ordering -----------------------------------------------------------

  // SORTS: what each sort key orders by. num gives the value (null: no data,
  // sorted last). The order uses each command's sort value, which follows
  // the live value only once that has moved past a margin (hysteresis), so
  // that noise does not reorder a steady service: the larger of abs and rel
  // times the value, or for error % and rate three standard deviations of
  // the noise the window's counts have by chance (noise).
  const SORTS = {
    error: { label: 'Error %', desc: true, num: (c) => c.err, abs: 5, rel: 0.25, noise: errorNoise },
    volume: { label: 'Volume', desc: true, num: (c) => c.rate, abs: 0.5, rel: 0.25, noise: rateNoise },
    name: { label: 'Name', desc: false },
    group: { label: 'Group', desc: false },
    state: { label: 'State', desc: true },
    since: { label: 'In state', desc: true, num: (c) => (c.n ? Number(c.n.timeInStateMs) || 0 : null), abs: 2000, rel: 0.25 },
    latency: { label: 'Latency p99', desc: true, num: (c) => c.lat['99'], abs: 5, rel: 0.25 },
    p50: { label: 'p50', desc: true, num: (c) => c.lat['50'], abs: 5, rel: 0.25 },
    max: { label: 'max', desc: true, num: (c) => c.lat['100'], abs: 5, rel: 0.25 },
  };
  for (const [k, label, , get] of COUNTERS) {
    SORTS['c:' + k] = { label, desc: true, num: (c) => (c.h ? get(c.h, c.n) : null), abs: 5, rel: 0.25 };
  }
  const SELECT_SORTS = ['error', 'volume', 'name', 'state', 'latency'];

  // errorNoise is 3 standard deviations of an error % of c's requests that
  // fail at rate pct by chance (a binomial proportion): at 20 % of 30
  // requests, 22 points; of 1,000, 4.
  function errorNoise(c, pct) {
    if (c.requests <= 0) return 0;
    const p = Math.min(Math.max(pct / 100, 0), 1);
    return 300 * Math.sqrt((p * (1 - p)) / c.requests);
  }

  // rateNoise is 3 standard deviations of a rate counted in c's window (a
  // Poisson count): 1 req/s in 10 s, ±0.95; 20 req/s, ±4.2.
  function rateNoise(c) {
    return (3 * Math.sqrt(c.calls)) / c.secs;
  }

  // sortKeys lists the numeric keys the current sort compares.
  function sortKeys() {
    if (ui.sort === 'error') return ['error', 'volume'];
    return SORTS[ui.sort].num ? [ui.sort] : [];
  }

  // rerank moves c's sort values whose live value left its margin, and
  // tells whether the order may have changed.
  function rerank(c, fresh) {
    let moved = c.rank.sev !== c.sev;
    c.rank.sev = c.sev;
    for (const k of sortKeys()) {
      const s = SORTS[k];
      const live = s.num(c);
      const old = c.rank[k];
      if (fresh || old === undefined) {
        c.rank[k] = live;
        continue;
      }
      if (live === null || old === null) {
        if (live !== old) {
          c.rank[k] = live;
          moved = true;
        }
        continue;
      }
      let margin = Math.max(s.abs, s.rel * Math.max(Math.abs(live), Math.abs(old)));
      if (s.noise) margin = Math.max(margin, s.noise(c, (live + old) / 2));
      if (Math.abs(live - old) > margin) {
        c.rank[k] = live;
        moved = true;
      }
    }
    return moved;
  }

  function byName(a, b) {
    return a.name.localeCompare(b.name) || a.group.localeCompare(b.group);
  }

  const HUE_RANK = { green: 0, yellow: 1, orange: 2, red: 3 };

  // hueRank is the health colour of c's error % sort value. No data (no
  // requests in the window) ranks as green, so that the first requests do
  // not move it.
  function hueRank(c) {
    return HUE_RANK[health(c.rank.error || 0, false)];
  }

  // byRank compares sort value k, no data last whatever the direction.
  function byRank(k, desc) {
    return (a, b) => {
      const x = a.rank[k];
      const y = b.rank[k];
      if (x === y) return 0;
      if (x === null || x === undefined) return 1;
      if (y === null || y === undefined) return -1;
      return desc ? y - x : x - y;
    };
  }

  function comparator() {
    const dir = ui.desc ? -1 : 1;
    switch (ui.sort) {
      case 'name':
        return (a, b) => dir * byName(a, b);
      case 'group':
        return (a, b) => dir * a.group.localeCompare(b.group) || byName(a, b);
      case 'state':
        return (a, b) => dir * (a.rank.sev - b.rank.sev) || byName(a, b);
      case 'error': {
        // Worst first, by state: the breaker's, then the health colour of
        // the error % (its sort value, past the noise); busiest first
        // within. A command moves when its breaker or its colour changes,
        // not at each step of an error % that climbs or jitters.
        const vol = byRank('volume', true);
        return (a, b) => dir * (a.rank.sev - b.rank.sev) || dir * (hueRank(a) - hueRank(b)) || vol(a, b) || byName(a, b);
      }
      default: {
        const cmp = byRank(ui.sort, ui.desc);
        return (a, b) => cmp(a, b) || byName(a, b);
      }
    }
  }

  // ---- filtering ----------------------------------------------------------

  const STATE_FILTERS = {
    all: () => true,
    attention: (c) => c.sev > 0 || c.hue !== 'green',
    open: (c) => c.sev === 3,
    'half-open': (c) => c.sev === 2,
    forced: (c) => c.stateKey === 'forced-open' || c.stateKey === 'forced-closed',
    closed: (c) => c.sev === 0,
  };

  function matches(filter, ...names) {
    if (!filter) return true;
    return names.some((s) => s.toLowerCase().includes(filter));
  }

  function shownCommand(c) {
    return matches(ui.filter, c.name, c.group) && STATE_FILTERS[ui.state](c);
  }

  // ---- visibility: only what is on screen is drawn ------------------------

  // A tile or row off screen is not updated; when it comes on screen (or
  // within 200 px of it) it catches up in the next animation frame.
  const onScreen = new IntersectionObserver((entries) => {
    let any = false;
    for (const e of entries) {
      const v = e.target._view;
      v.visible = e.isIntersecting;
      if (v.visible && (v.ver !== v.rec.ver || v.sparkVer !== v.rec.ver)) any = true;
    }
    if (any) requestAnimationFrame(render);
  }, { rootMargin: '200px 0px' });

  // watch follows v on screen. A new tile or row counts as on screen until
  // the observer's first report, so the first paint is complete.
  function watch(v) {
    v.root._view = v;
    v.visible = true;
    onScreen.observe(v.root);
  }

  function sparkPath(hist, now, max, pick, close, W, H) {
    if (!hist.length) return '';
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

  function sparkline(cls) {
    const s = { W: 240, H: 56 };
    s.root = svg('svg', { class: cls, viewBox: '0 0 240 56', preserveAspectRatio: 'none', 'aria-hidden': 'true' });
    s.area = svg('path', { class: 'area' });
    s.errLine = svg('path', { class: 'errline' });
    s.root.append(s.area, s.errLine);
    return s;
  }

  // drawSpark redraws v's sparkline when it has news.
  function drawSpark(v, c, now) {
    if (v.sparkVer === c.ver) return;
    v.sparkVer = c.ver;
    const s = v.spark;
    let max = 1;
    for (const p of c.hist) max = Math.max(max, p.rate);
    setAttr(s.area, 'd', sparkPath(c.hist, now, max, (p) => p.rate, true, s.W, s.H));
    setAttr(s.errLine, 'd', sparkPath(c.hist, now, max, (p) => p.errs, false, s.W, s.H));
  }

  // ---- command tiles --------------------------------------------------------

  function buildCommandTile(c) {
    const t = { rec: c, ver: -1, sparkVer: -1 };
    t.root = el('article', 'tile cmd');
    t.root.setAttribute('data-command', c.name);
    t.root.setAttribute('data-group', c.group);

    const head = el('div', 'head');
    t.dot = svg('svg', { class: 'dot', viewBox: '0 0 32 32', 'aria-hidden': 'true' });
    t.circle = svg('circle', { cx: '16', cy: '16', r: '3' });
    t.dot.append(t.circle);
    const title = el('div', 'title');
    t.name = el('span', 'name', c.name);
    t.name.title = c.name;
    t.group = el('span', 'group', c.group);
    t.group.title = c.group;
    title.append(t.name, t.group);
    head.append(t.dot, title);

    const stateLine = el('div', 'stateline');
    t.state = el('span', 'state');
    t.groupState = el('span', 'groupstate');
    t.since = el('span', 'since');
    stateLine.append(t.state, t.groupState, t.since);

    const main = el('div', 'main');
    const errBox = el('div', 'stat err');
    t.errPct = el('span', 'big errpct');
    errBox.append(t.errPct, el('small', '', 'errors'));
    const rateBox = el('div', 'stat rate');
    t.rate = el('span', 'big rateval');
    rateBox.append(t.rate, el('small', '', 'req/s'));
    t.spark = sparkline('chart');
    main.append(errBox, rateBox, t.spark.root);

    const circ = el('div', 'circuit');
    t.progress = el('span', 'progress');
    t.trip = el('span', 'trip');
    t.policy = el('span', 'policy');
    circ.append(t.progress, t.trip, t.policy);

    const counters = el('div', 'counters');
    t.counters = {};
    t.cells = {};
    for (const [k, label] of COUNTERS) {
      const cell = el('div', 'counter c-' + k);
      cell.setAttribute('data-k', k);
      cell.title = label;
      const v = el('span', 'v', '0');
      cell.append(v, el('span', 'k', label));
      cell.hidden = true;
      counters.append(cell);
      t.counters[k] = v;
      t.cells[k] = cell;
    }

    const lat = el('div', 'latency');
    t.lat = {};
    for (const [k, label] of PERCENTILES) {
      const cell = el('div', 'pct');
      cell.setAttribute('data-p', label);
      const v = el('span', 'v', NO_DATA);
      cell.append(el('span', 'k', label), v);
      lat.append(cell);
      t.lat[k] = v;
    }
    const mean = el('div', 'pct');
    mean.setAttribute('data-p', 'mean');
    t.mean = el('span', 'v', NO_DATA);
    mean.append(el('span', 'k', 'mean'), t.mean);
    lat.append(mean);

    const foot = el('div', 'foot');
    t.degraded = el('span', 'degraded');
    t.slow = el('span', 'slow');
    t.inflight = el('span', 'inflight');
    t.detached = el('span', 'detached warn');
    t.timeout = el('span', 'timeout');
    t.hosts = el('span', 'hosts');
    t.probes = el('span', 'probes');
    t.alert = el('span', 'alert warn');
    foot.append(t.degraded, t.slow, t.inflight, t.detached, t.timeout, t.hosts, t.probes, t.alert);

    t.root.append(head, stateLine, main, circ, counters, lat, foot);
    watch(t);
    return t;
  }

  function renderTile(c, now) {
    if (!c.tile) c.tile = buildCommandTile(c);
    const t = c.tile;
    setClass(t.root, 'stale', now - c.seen > STALE_MS);
    if (ui.token && !t.controls) {
      t.controls = controlRow(c.group, c.name);
      t.root.append(t.controls);
    }
    if (!t.visible) return;
    drawSpark(t, c, now);
    if (t.ver === c.ver) return;
    t.ver = c.ver;
    const h = c.h;
    const n = c.n;
    const key = c.stateKey;
    const hue = c.hue;

    setAttr(t.root, 'data-state', key);
    setAttr(t.root, 'data-health', hue);
    setText(t.state, STATE_LABEL[key]);
    setAttr(t.state, 'data-state', key);
    const [since, progress, trip] = circuitDetail(n);
    setText(t.since, since);
    setText(t.progress, progress);
    setText(t.trip, trip);
    setText(t.policy, policyDetail(n));
    setAttr(t.root, 'data-warming', n && n.warmingUp ? 'true' : '');
    setText(t.groupState, c.groupKey ? 'group ' + STATE_LABEL[c.groupKey] : '');

    // Circle: area grows with the rate (square-root scale up to 400/s), colour with health.
    const r = 3 + 12 * Math.sqrt(Math.min(c.rate, 400) / 400);
    setAttr(t.circle, 'r', r.toFixed(1));
    setAttr(t.circle, 'class', 'h-' + hue);

    setText(t.errPct, fmtPct(c.err));
    setAttr(t.errPct, 'class', 'big errpct h-' + hue);
    setText(t.rate, fmtRate(c.rate));

    if (h) {
      for (const [k, , , get] of COUNTERS) {
        setText(t.counters[k], fmtCount(get(h, n)));
        setHidden(t.cells[k], !c.features.has(k));
      }
      for (const [k] of PERCENTILES) setText(t.lat[k], fmtLatency(c.lat[k]));
      setText(t.mean, fmtLatency(c.mean));
      const hosts = hostsOf(h);
      setText(t.hosts, hosts > 1 ? fmtInt(hosts) + ' hosts' : '');
      const timeout = timeoutOf(h, n);
      setText(t.timeout, timeout > 0 ? 'timeout ' + fmtMs(timeout) : '');
      t.cells.fallback.title =
        'fallback failures ' + fmtInt(h.rollingCountFallbackFailure) +
        ', rejected ' + fmtInt(h.rollingCountFallbackRejection) +
        ', missing ' + fmtInt(h.rollingCountFallbackMissing);
    }
    if (n) {
      const fallback = c.features.has('fallback');
      setText(t.degraded, fallback || n.degradedRate > 0 ? 'degraded ' + fmtPct(n.degradedRate * 100) : '');
      setText(t.slow, n.slowCallDurationMs > 0 || n.slowRatio > 0 ? 'slow ' + fmtPct(n.slowRatio * 100) : '');
      setText(t.inflight, 'in flight ' + fmtInt(n.inFlight));
      setText(t.detached, n.detached > 0 ? 'detached ' + fmtInt(n.detached) : '');
      setClass(t.degraded, 'warn', n.degradedRate > 0);
      setClass(t.slow, 'warn', n.slowRatio > 0);
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
  }

  // ---- command table rows ---------------------------------------------------

  // COLUMNS of the table: key (also its sort key, or '' for none), header,
  // width, and the counter it shows for counter columns.
  const COLUMNS = [
    ['name', 'Command', 'minmax(190px, 2fr)'],
    ['group', 'Group', 'minmax(96px, 1fr)'],
    ['state', 'State', '120px'],
    ['since', 'In state', '70px'],
    ['error', 'Error %', '64px'],
    ['volume', 'Req/s', '64px'],
    ['p50', 'p50', '62px'],
    ['latency', 'p99', '62px'],
    ['max', 'max', '62px'],
    ['', 'Last 2 min', '100px'],
  ].concat(COUNTERS.map(([k, label]) => ['c:' + k, label, '66px', k]));

  function columnClass(col) {
    return col[3] ? 'col-counter c-' + col[3] : 'col-' + (col[0] || 'spark');
  }

  // columnShown tells whether the table shows column col now: no group
  // column when rows sit under their group's heading; a counter column
  // once some command has its feature on.
  function columnShown(col) {
    if (col[0] === 'group') return !ui.grouped;
    if (col[3]) return seenFeatures.has(col[3]);
    return true;
  }

  function buildRow(c) {
    const r = { rec: c, ver: -1, sparkVer: -1, cells: {} };
    r.root = el('div', 'tr cmdrow');
    r.root.setAttribute('role', 'row');
    r.root.setAttribute('data-row', c.name);
    r.root.setAttribute('data-group', c.group);
    for (const col of COLUMNS) {
      const cell = el('div', 'td ' + columnClass(col));
      cell.setAttribute('role', 'cell');
      r.cells[col[0]] = cell;
      r.root.append(cell);
    }
    r.dot = el('span', 'hdot');
    r.name = el('span', 'name', c.name);
    r.name.title = c.name;
    r.cells.name.append(r.dot, r.name);
    setText(r.cells.group, c.group);
    r.cells.group.title = c.group;
    r.state = el('span', 'state');
    r.cells.state.append(r.state);
    r.spark = sparkline('spark');
    r.cells[''].append(r.spark.root);
    hideColumns(r);
    watch(r);
    return r;
  }

  function renderRow(c, now) {
    if (!c.row) c.row = buildRow(c);
    const r = c.row;
    setClass(r.root, 'stale', now - c.seen > STALE_MS);
    if (!r.visible) return;
    drawSpark(r, c, now);
    if (r.ver === c.ver) return;
    r.ver = c.ver;
    const h = c.h;
    const n = c.n;
    setAttr(r.root, 'data-state', c.stateKey);
    setAttr(r.root, 'data-health', c.hue);
    setAttr(r.dot, 'class', 'hdot h-' + c.hue);
    // The worse of the command's breaker and its group's, which refuses
    // the command's calls too.
    const byGroup = c.groupKey && c.sev > severity(c.stateKey, '');
    setText(r.state, byGroup ? 'Group ' + STATE_LABEL[c.groupKey] : STATE_LABEL[c.stateKey]);
    setAttr(r.state, 'data-state', byGroup ? c.groupKey : c.stateKey);
    setText(r.cells.since, n ? fmtDur(n.timeInStateMs) : NO_DATA);
    setText(r.cells.error, fmtPct(c.err));
    setAttr(r.cells.error, 'data-health', c.hue);
    setText(r.cells.volume, fmtRate(c.rate));
    setText(r.cells.p50, fmtLatency(c.lat['50']));
    setText(r.cells.latency, fmtLatency(c.lat['99']));
    setText(r.cells.max, fmtLatency(c.lat['100']));
    for (const [k, , , get] of COUNTERS) {
      const cell = r.cells['c:' + k];
      setText(cell, !h ? NO_DATA : c.features.has(k) ? fmtCount(get(h, n)) : '');
    }
  }

  function buildTableHead() {
    const head = document.getElementById('thead');
    for (const col of COLUMNS) {
      const cell = el('div', 'th ' + columnClass(col));
      cell.setAttribute('role', 'columnheader');
      cell.setAttribute('data-col', col[0]);
      if (col[0]) {
        const b = el('button', 'sorter', col[1]);
        b.type = 'button';
        b.addEventListener('click', () => {
          setSort(col[0], ui.sort === col[0] ? !ui.desc : SORTS[col[0]].desc);
        });
        cell.append(b);
      } else {
        cell.textContent = col[1];
      }
      head.append(cell);
      col.head = cell;
    }
  }

  // layoutTable shows the columns in use and sets the grid's tracks, only
  // when they change.
  function layoutTable() {
    const shown = COLUMNS.filter(columnShown);
    const key = shown.map((c) => c[0]).join(',');
    if (key === columnsKey) return;
    columnsKey = key;
    const table = document.getElementById('table');
    table.style.setProperty('--cols', shown.map((c) => c[2]).join(' '));
    // The narrowest the row can be: past it, the table scrolls sideways.
    table.style.setProperty('--minw', shown.reduce((w, c) => w + parseInt(c[2].replace('minmax(', ''), 10), 0) + 'px');
    hiddenColumns = new Set(COLUMNS.filter((c) => !columnShown(c)).map((c) => c[0]));
    for (const col of COLUMNS) setHidden(col.head, hiddenColumns.has(col[0]));
    for (const c of commands.values()) {
      if (c.row) hideColumns(c.row);
    }
  }

  function hideColumns(r) {
    for (const col of COLUMNS) setHidden(r.cells[col[0]], hiddenColumns.has(col[0]));
  }

  function markSortedColumn() {
    for (const col of COLUMNS) {
      if (!col.head) continue;
      const sorted = col[0] === ui.sort;
      if (sorted) col.head.setAttribute('aria-sort', ui.desc ? 'descending' : 'ascending');
      else col.head.removeAttribute('aria-sort');
    }
  }

  // ---- group sections -------------------------------------------------------

  function sectionOf(group) {
    let s = sections.get(group);
    if (!s) {
      s = { name: group, tiles: null, rows: null };
      sections.set(group, s);
    }
    return s;
  }

  function groupHead(s, cls) {
    const head = el('div', cls);
    const toggle = el('button', 'fold');
    toggle.type = 'button';
    toggle.setAttribute('aria-expanded', 'true');
    const name = el('span', 'gname', s.name);
    name.title = s.name;
    toggle.append(el('span', 'caret', '▾'), name);
    toggle.addEventListener('click', () => {
      if (ui.collapsed.has(s.name)) ui.collapsed.delete(s.name);
      else ui.collapsed.add(s.name);
      render();
    });
    const summary = el('span', 'gsum');
    head.append(toggle, summary);
    return { head, toggle, summary };
  }

  function tileSection(s) {
    if (!s.tiles) {
      const v = groupHead(s, 'ghead');
      v.root = el('section', 'grp');
      v.root.setAttribute('data-section', s.name);
      v.body = el('div', 'grid');
      v.root.append(v.head, v.body);
      s.tiles = v;
    }
    return s.tiles;
  }

  function rowSection(s) {
    if (!s.rows) {
      const v = groupHead(s, 'tr tgh');
      v.head.setAttribute('role', 'row');
      v.root = el('div', 'tgroup');
      v.root.setAttribute('role', 'rowgroup');
      v.root.setAttribute('data-section', s.name);
      v.body = el('div', 'tbody');
      v.root.append(v.head, v.body);
      s.rows = v;
    }
    return s.rows;
  }

  // summarize tells what a folded group hides: its commands, their worst
  // states, its bulkhead.
  function summarize(cmds, shown, group) {
    const open = cmds.filter((c) => c.sev === 3).length;
    const half = cmds.filter((c) => c.sev === 2).length;
    const parts = [shown + ' of ' + cmds.length + (cmds.length === 1 ? ' command' : ' commands')];
    if (open) parts.push(open + ' open');
    if (half) parts.push(half + ' half-open');
    const p = pools.get(group);
    if (p && p.n) {
      parts.push(p.n.strategy + ' ' + fmtInt(p.n.active) + '/' + fmtInt(p.n.capacity) + ' active');
      if (p.n.queueCapacity) parts.push(fmtInt(p.n.queued) + '/' + fmtInt(p.n.queueCapacity) + ' queued');
      if (p.n.rollingRejected) parts.push(fmtInt(p.n.rollingRejected) + ' rejected');
    }
    return [parts.join(' · '), open ? 'open' : half ? 'half-open' : ''];
  }

  // place puts nodes in container in order, moving only those out of place,
  // and removes the ones left after them.
  function place(container, nodes) {
    let i = 0;
    for (const node of nodes) {
      if (container.children[i] !== node) container.insertBefore(node, container.children[i] || null);
      i++;
    }
    while (container.children.length > i) container.lastChild.remove();
  }

  // ---- bulkheads --------------------------------------------------------

  function poolRecord(name) {
    let p = pools.get(name);
    if (!p) {
      p = { name, h: null, n: null, seen: 0, tile: null, ver: 0 };
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
    const t = { ver: -1 };
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
    setClass(t.root, 'stale', now - p.seen > STALE_MS);
    if (ui.token && !t.controls) {
      t.controls = controlRow(p.name, '');
      t.root.append(t.controls);
    }
    if (t.ver === p.ver) return;
    t.ver = p.ver;
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
    setText(t.f.active, fmtInt(v.active));
    setText(t.f.queued, v.queueCap ? fmtCount(v.queued) + ' / ' + fmtCount(v.queueCap) : fmtCount(v.queued));
    setText(t.f.size, fmtCount(v.size));
    setText(t.f.largest, fmtCount(v.largest));
    setText(t.f.rejected, fmtCount(v.rejected));
    setText(t.f.detached, v.detached === undefined ? NO_DATA : fmtCount(v.detached));
    setText(t.f.executed, fmtRate(v.executed || 0));
    setText(t.f.completed, fmtCount(v.completed));
    setClass(t.f.rejected.parentNode, 'warn', v.rejected > 0);
    setClass(t.f.detached.parentNode, 'warn', v.detached > 0);
    const size = Math.max(1, Number(v.size) || 0);
    t.fill.style.width = Math.min(100, (100 * (Number(v.active) || 0)) / size).toFixed(1) + '%';
    const qcap = Number(v.queueCap) || 0;
    t.queueFill.style.width = qcap ? Math.min(100, (100 * (Number(v.queued) || 0)) / qcap).toFixed(1) + '%' : '0%';
    setClass(t.root, 'full', (Number(v.active) || 0) >= size);
    const key = circuit(n, null);
    setText(t.state, n ? STATE_LABEL[key] : NO_DATA);
    setAttr(t.state, 'data-state', n ? key : '');
    setText(t.since, n ? circuitDetail(n).slice(0, 2).filter(Boolean).join(' · ') : '');
    setText(t.policy, policyDetail(n));
    const config = [];
    if (n && n.configGeneration !== undefined) {
      config.push('config gen ' + fmtInt(n.configGeneration) + ' · changed ' + fmtDur(n.configAgeMs) + ' ago');
    }
    // The client-side throttle: the share it refuses, from the window's accepts and requests.
    if (n && n.throttleK > 0) {
      config.push('throttle ' + fmtPct(n.throttleProbability * 100) + ' (K ' + n.throttleK + ', ' +
        fmtInt(n.throttleAccepts) + ' accepted of ' + fmtInt(n.throttleRequests) + ')');
    }
    // The adaptive concurrency limit: the pool's size is the limit; say what it follows.
    if (n && n.adaptiveLimit > 0) {
      config.push('adaptive limit ' + fmtInt(n.adaptiveLimit) + ' (no-load ' + n.adaptiveNoLoadMs.toFixed(1) +
        ' ms, now ' + n.adaptiveLatencyMs.toFixed(1) + ' ms)');
    }
    setText(t.config, config.join(' · '));
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

  // ---- the render loop --------------------------------------------------

  // schedule draws what changed soon: at the end of the frame (the
  // stream's ping), or within FLUSH_MS for a stream that sends no pings.
  let pending = false;
  let flush = null;
  function schedule() {
    if (pending) return;
    pending = true;
    flush = setTimeout(render, FLUSH_MS);
  }

  let order = []; // the commands with data, in display order

  function renderCommands(now) {
    for (const c of commands.values()) {
      if ((!c.h && !c.n) || c.derived === c.ver) continue;
      c.derived = c.ver;
      derive(c);
      if (rerank(c, false)) reorder = true;
    }
    if (reorder) {
      reorder = false;
      order = Array.from(commands.values()).filter((c) => c.h || c.n);
      order.sort(comparator());
    }

    const tiles = ui.view === 'tiles';
    const panel = document.getElementById('commands');
    const table = document.getElementById('table');
    setHidden(panel, !tiles);
    setHidden(table, tiles);
    if (!tiles) layoutTable();

    let nShown = 0;
    const byGroup = new Map();
    for (const c of order) {
      let g = byGroup.get(c.group);
      if (!g) {
        g = { cmds: [], shown: [], sev: 0 };
        byGroup.set(c.group, g);
      }
      g.cmds.push(c);
      g.sev = Math.max(g.sev, c.sev);
      if (shownCommand(c)) {
        g.shown.push(c);
        nShown++;
      }
    }

    const viewOf = (c) => {
      if (tiles) {
        renderTile(c, now);
        return c.tile.root;
      }
      renderRow(c, now);
      return c.row.root;
    };

    const container = tiles ? panel : document.getElementById('tbody');
    if (!ui.grouped) {
      const nodes = [];
      for (const c of order) {
        if (!shownCommand(c)) continue;
        nodes.push(viewOf(c));
      }
      setClass(container, 'grid', tiles);
      place(container, nodes);
    } else {
      const names = Array.from(byGroup.keys());
      const worstFirst = ui.sort === 'error' || ui.sort === 'state';
      names.sort((a, b) => (worstFirst ? byGroup.get(b).sev - byGroup.get(a).sev : 0) || a.localeCompare(b));
      const nodes = [];
      for (const name of names) {
        const g = byGroup.get(name);
        if (!g.shown.length) continue;
        const s = sectionOf(name);
        const v = tiles ? tileSection(s) : rowSection(s);
        const folded = ui.collapsed.has(name);
        setAttr(v.toggle, 'aria-expanded', folded ? 'false' : 'true');
        setAttr(v.root, 'data-collapsed', folded ? 'true' : 'false');
        const [sum, worst] = summarize(g.cmds, g.shown.length, name);
        setText(v.summary, sum);
        setAttr(v.summary, 'data-worst', worst);
        setHidden(v.body, folded);
        place(v.body, folded ? [] : g.shown.map(viewOf));
        nodes.push(v.root);
      }
      setClass(container, 'grid', false);
      place(container, nodes);
    }
    // A command the filters leave out is taken off the page; its tile or
    // row is kept, and catches up when it comes back.

    setText(document.getElementById('cmd-count'), order.length ? nShown + ' of ' + order.length : '');
    setHidden(document.getElementById('cmd-empty'), order.length > 0);
  }

  function render() {
    pending = false;
    clearTimeout(flush);
    const now = Date.now();
    const f = ui.filter;
    renderCommands(now);

    const ps = Array.from(pools.values()).sort((a, b) => a.name.localeCompare(b.name));
    const poolNodes = [];
    for (const p of ps) {
      if (!matches(f, p.name)) continue;
      renderPool(p, now);
      poolNodes.push(p.tile.root);
    }
    place(document.getElementById('pools'), poolNodes);
    setText(document.getElementById('pool-count'), ps.length ? poolNodes.length + ' of ' + ps.length : '');
    setHidden(document.getElementById('pool-empty'), ps.length > 0);

    const qs = Array.from(queues.values()).sort((a, b) => a.name.localeCompare(b.name));
    const queueNodes = [];
    for (const q of qs) {
      if (!matches(f, q.name)) continue;
      renderQueue(q, now);
      queueNodes.push(q.tile.root);
    }
    place(document.getElementById('queues'), queueNodes);
    setHidden(document.getElementById('queue-panel'), qs.length === 0);
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
      setText(t.f[k], k === 'oldestAgeMs' ? fmtDur(Number(ev[k]) || 0) : fmtCount(Number(ev[k]) || 0));
    }
    setClass(t.root, 'stale', now - q.seen > STALE_MS);
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
        onHistory(ev, now);
        break;
      case 'HystrixThreadPool': {
        const p = poolRecord(String(ev.name));
        p.h = ev;
        p.seen = now;
        p.ver++;
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
        p.ver++;
        break;
      }
      default:
        return;
    }
    schedule();
  }

  // The stream is read with fetch, not EventSource: it sends one event per
  // command and per group, and EventSource dispatches each as a task of its
  // own (1,200 a frame with 300 commands), which cost the browser more than
  // all the page's rendering. Read in chunks, a frame takes a few tasks.

  // sseParser returns a function that takes the stream's text as it comes,
  // in pieces cut anywhere, and calls onData with the data of each event,
  // as EventSource does: the values of its "data:" lines joined by "\n",
  // dispatched at a blank line; lines end with LF, CR or CRLF; comments and
  // other fields are ignored, but for Hystrix's "ping:", which ends a frame:
  // it calls onPing.
  function sseParser(onData, onPing) {
    let rest = ''; // the line not yet ended
    let data = null; // the data lines of the event being read
    return (text) => {
      text = rest + text;
      let cut = text.length;
      if (text.charCodeAt(cut - 1) === 13) cut--; // a CR may be half a CRLF
      const lines = text.slice(0, cut).split(/\r\n|\r|\n/);
      rest = lines.pop() + text.slice(cut);
      for (const line of lines) {
        if (line === '') {
          if (data !== null) onData(data.join('\n'));
          data = null;
        } else if (line.startsWith('data:')) {
          if (data === null) data = [];
          data.push(line.slice(line.charCodeAt(5) === 32 ? 6 : 5));
        } else if (line.startsWith('ping:')) {
          onPing();
        }
      }
    };
  }

  const conn = {
    abort: null, // ends the current connection
    open: false,
    last: 0, // when the stream last sent something
    retry: null,
    everOpen: false,
  };

  function setConn(state, text) {
    const b = document.getElementById('conn');
    setAttr(b, 'data-conn', state);
    b.className = 'badge conn ' + state;
    setText(b, text);
  }

  // read reads the stream at url until it ends, fails or ctrl aborts it.
  async function read(url, ctrl) {
    const res = await fetch(url, { headers: { Accept: 'text/event-stream' }, cache: 'no-store', signal: ctrl.signal });
    if (!res.ok || !res.body) throw new Error('stream: HTTP ' + res.status);
    conn.open = true;
    conn.everOpen = true;
    conn.last = Date.now();
    setConn('live', 'live');
    const parse = sseParser((data) => {
      let ev;
      try {
        ev = JSON.parse(data);
      } catch (e) {
        return;
      }
      onEvent(ev, conn.last);
    }, () => {
      if (pending) render(); // the frame is complete: draw it now
    });
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      conn.last = Date.now();
      parse(value);
    }
  }

  // connect opens the stream at url, and opens it again RETRY_MS after it
  // ends or fails (a dropped connection, an HTTP error such as 503 past the
  // connection cap), for as long as the page is open.
  function connect(url) {
    if (conn.abort) conn.abort.abort();
    clearTimeout(conn.retry);
    setConn(conn.everOpen ? 'reconnecting' : 'connecting', conn.everOpen ? 'reconnecting…' : 'connecting…');
    const ctrl = new AbortController();
    conn.abort = ctrl;
    conn.open = false;
    conn.last = Date.now();
    read(url, ctrl).catch(() => {}).then(() => {
      if (conn.abort !== ctrl) return; // a newer connection took over
      conn.open = false;
      conn.everOpen = true;
      setConn('reconnecting', 'reconnecting…');
      conn.retry = setTimeout(() => connect(url), RETRY_MS);
    });
  }

  // ---- the controls of the view -------------------------------------------

  function setSort(key, desc) {
    ui.sort = key;
    ui.desc = desc;
    const sel = document.getElementById('sort');
    const other = document.getElementById('sort-other');
    if (SELECT_SORTS.includes(key)) {
      other.hidden = true;
      sel.value = key;
    } else {
      other.hidden = false;
      other.value = key;
      other.textContent = 'Column: ' + SORTS[key].label;
      sel.value = key;
    }
    for (const c of commands.values()) rerank(c, true);
    reorder = true;
    markSortedColumn();
    render();
  }

  function setView(view) {
    ui.view = view;
    for (const b of document.querySelectorAll('[data-view]')) {
      b.setAttribute('aria-pressed', String(b.dataset.view === view));
    }
    render();
  }

  function start() {
    const params = new URLSearchParams(location.search);
    const sortSel = document.getElementById('sort');
    const stateSel = document.getElementById('state-filter');
    const groupBox = document.getElementById('grouped');
    const filterBox = document.getElementById('filter');
    buildTableHead();
    const sort = params.get('sort');
    if (sort in SORTS) {
      ui.sort = sort;
      ui.desc = SORTS[sort].desc;
    }
    if (params.get('state') in STATE_FILTERS) ui.state = params.get('state');
    stateSel.value = ui.state;
    ui.grouped = params.get('group') === '1';
    groupBox.checked = ui.grouped;
    if (params.get('view') === 'table') ui.view = 'table';
    if (params.get('filter')) {
      filterBox.value = params.get('filter');
      ui.filter = filterBox.value.trim().toLowerCase();
    }
    sortSel.addEventListener('change', () => setSort(sortSel.value, SORTS[sortSel.value].desc));
    stateSel.addEventListener('change', () => {
      ui.state = stateSel.value;
      render();
    });
    groupBox.addEventListener('change', () => {
      ui.grouped = groupBox.checked;
      render();
    });
    filterBox.addEventListener('input', () => {
      ui.filter = filterBox.value.trim().toLowerCase();
      render();
    });
    for (const b of document.querySelectorAll('[data-view]')) {
      b.addEventListener('click', () => setView(b.dataset.view));
    }
    setSort(ui.sort, ui.desc);
    setView(ui.view);

    setupControls();
    const url = streamURL();
    const source = document.getElementById('source');
    setText(source, url);
    source.title = url;
    connect(url);
    // Watchdog: a stream that stays open but silent (a proxy holding a dead
    // connection) is reopened; the tiles' staleness is redrawn.
    setInterval(() => {
      if (conn.open && Date.now() - conn.last > SILENT_MS) {
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
