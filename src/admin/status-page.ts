/**
 * The status page served at `GET /fleet`: one self-contained HTML document (no CDN, works offline),
 * live over `GET /fleet/events`. Kept as a string module so `tsc` carries it into dist/ with no copy
 * step. Built once at start-up, with a Content-Security-Policy that admits exactly its own inline
 * script and style by hash.
 *
 * The script below is plain ES2017 inside a TS template string: no backticks and no `${` in it.
 * Every value from the server is written with textContent, never parsed as HTML.
 */
import { createHash } from 'node:crypto';
import { STRAGGLER_RATIO } from '../metrics/stragglers.js';
import { PHASE_WORDS } from './phase-words.js';

const STYLE = `
:root {
  color-scheme: light dark;
  --bg: #f4f5f7; --card: #fff; --fg: #1c2027; --muted: #656d7a; --line: #dfe2e7; --track: #e6e8ec;
  --ready: #1e9e57; --starting: #2f6fd6; --stalled: #d99a06; --failed: #d93f3f;
  --unhealthy: #e3741c; --draining: #8b919b; --down: #4b515a;
}
@media (prefers-color-scheme: dark) {
  :root { --bg: #14171c; --card: #1d2128; --fg: #e5e8ed; --muted: #98a0ad; --line: #2c313a; --track: #2c323c;
    --down: #7c838e; --draining: #a4aab3; }
}
* { box-sizing: border-box; }
html { -webkit-text-size-adjust: 100%; }
body { margin: 0; background: var(--bg); color: var(--fg);
  font: 14px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
header { position: sticky; top: 0; z-index: 1; background: var(--bg); padding: 12px 16px 8px;
  border-bottom: 1px solid var(--line); }
.head { display: flex; flex-wrap: wrap; align-items: baseline; gap: 4px 12px; }
h1 { margin: 0; font-size: 16px; letter-spacing: .02em; }
#summary { font-size: 16px; font-weight: 600; flex: 1 1 auto; min-width: 0; overflow-wrap: anywhere; }
#summary.low { color: var(--failed); }
#conn { font-size: 12px; color: var(--muted); white-space: nowrap; }
#conn::before { content: ""; display: inline-block; width: 8px; height: 8px; border-radius: 50%;
  margin-right: 5px; background: var(--draining); }
#conn.live::before { background: var(--ready); }
#conn.lost::before { background: var(--failed); }
#fleetbar { display: flex; gap: 2px; height: 6px; margin-top: 8px; }
#fleetbar span { flex: 1 1 0; border-radius: 2px; background: var(--c, var(--down)); }
main { display: grid; grid-template-columns: repeat(auto-fill, minmax(min(100%, 290px), 1fr)); gap: 12px;
  align-items: start; padding: 12px 16px 24px; }
.card { background: var(--card); border: 1px solid var(--line); border-left: 5px solid var(--c, var(--down));
  border-radius: 8px; padding: 10px 12px; min-width: 0; display: flex; flex-direction: column; gap: 4px; }
.top { display: flex; align-items: center; gap: 8px; min-width: 0; }
.name { font-weight: 700; font-size: 15px; overflow: hidden; text-overflow: ellipsis; white-space: nowrap;
  flex: 1 1 auto; min-width: 0; }
.badge { flex: none; font-size: 12px; font-weight: 600; color: #fff; background: var(--c, var(--down));
  border-radius: 10px; padding: 1px 9px; }
.url { font-size: 12px; color: var(--muted); overflow-wrap: anywhere; }
.phase { font-weight: 600; min-height: 1.4em; overflow-wrap: anywhere; }
.bar { height: 8px; border-radius: 4px; background: var(--track); overflow: hidden; }
.fill { height: 100%; width: 0; background: var(--c, var(--down)); transition: width .25s linear; }
.eta { font-size: 12px; color: var(--muted); min-height: 1.4em; }
.reason { color: var(--failed); font-size: 13px; overflow-wrap: anywhere; }
.s-unhealthy .reason, .s-starting .reason { color: var(--unhealthy); }
.log { font: 11px/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; color: var(--muted);
  white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
.proc { font-size: 12px; color: var(--muted); overflow-wrap: anywhere; }
.remedy { font-size: 12px; color: var(--stalled); font-weight: 600; overflow-wrap: anywhere; }
.meta { display: flex; flex-wrap: wrap; justify-content: space-between; gap: 2px 12px; font-size: 12px;
  color: var(--muted); border-top: 1px solid var(--line); padding-top: 5px; margin-top: 2px; }
[hidden] { display: none !important; }
.kv-events[data-kv="live"] { color: var(--ready); } .kv-events[data-kv="stale"] { color: var(--stalled); }
.s-ready { --c: var(--ready); } .s-starting { --c: var(--starting); } .s-stalled { --c: var(--stalled); }
.s-failed { --c: var(--failed); } .s-unhealthy { --c: var(--unhealthy); }
.s-draining { --c: var(--draining); } .s-down { --c: var(--down); }
#empty { padding: 24px 16px; color: var(--muted); }
/* The serving view: fleet totals under the summary, per-card rates and reported load. */
#serving { display: flex; flex-wrap: wrap; align-items: baseline; gap: 2px 18px; margin-top: 6px; font-size: 13px;
  color: var(--muted); font-variant-numeric: tabular-nums; }
#serving b { color: var(--fg); font-size: 17px; font-weight: 700; margin-right: 3px; }
#serving .warn b { color: var(--stalled); } #serving .bad b { color: var(--failed); }
#serving .window { font-size: 12px; }
.serve { display: flex; flex-direction: column; gap: 2px; font-size: 13px; font-variant-numeric: tabular-nums; }
.serve .rates { white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
.serve .rates b { font-size: 15px; font-weight: 700; }
.serve .line { display: flex; align-items: center; gap: 10px; font-size: 12px; color: var(--muted); }
.serve .load { flex: none; }
.serve .kv { flex: 1 1 auto; min-width: 0; display: flex; align-items: center; gap: 6px; white-space: nowrap; }
.kvbar { flex: 1 1 auto; min-width: 24px; height: 6px; border-radius: 3px; background: var(--track); overflow: hidden; }
.kvfill { height: 100%; width: 0; background: var(--starting); transition: width .25s linear; }
.kv.full .kvfill { background: var(--unhealthy); }
.serve .latency, .serve .thinking { font-size: 12px; color: var(--muted); white-space: nowrap; }
.serve .slow { grid-column: 1 / -1; font-size: 12px; color: var(--stalled); }
.mark { flex: none; font-size: 11px; font-weight: 700; color: #fff; background: var(--stalled); border-radius: 10px;
  padding: 1px 7px; }
.card.straggler { box-shadow: 0 0 0 2px var(--stalled); }
`;

const SCRIPT = `
(function () {
  'use strict';
  var PHASES = __PHASE_WORDS__;
  var ORDER = ['ready', 'starting', 'unhealthy', 'draining', 'failed', 'down'];
  var backends = new Map();
  var cards = new Map();
  var minReady = 1;
  // Requests waiting in the queue per priority class, highest first.
  var waiting = {};
  var grid = document.getElementById('grid');
  var summaryEl = document.getElementById('summary');
  var connEl = document.getElementById('conn');
  var fleetbar = document.getElementById('fleetbar');
  var empty = document.getElementById('empty');
  var servingEl = document.getElementById('serving');
  var servingBy = new Map();
  var STRAGGLER_RATIO = __STRAGGLER_RATIO__;

  function el(tag, cls, parent) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (parent) parent.appendChild(e);
    return e;
  }
  function duration(seconds) {
    seconds = Math.max(0, Math.round(seconds));
    if (seconds < 60) return seconds + 's';
    var m = Math.floor(seconds / 60), s = seconds % 60;
    if (m < 60) return m + 'm ' + (s < 10 ? '0' : '') + s + 's';
    var h = Math.floor(m / 60); m = m % 60;
    return h + 'h ' + (m < 10 ? '0' : '') + m + 'm';
  }
  function phaseWords(b) {
    if (!b.phase) return '';
    var words = PHASES[b.phase] || b.phase.replace(/_/g, ' ');
    return b.progress ? words + ' ' + b.progress.done + '/' + b.progress.total : words;
  }
  function colourClass(b) {
    return b.state === 'starting' && b.reason === 'stalled' ? 's-stalled' : 's-' + b.state;
  }

  function card(name) {
    var c = cards.get(name);
    if (c) return c;
    var root = el('article', 'card');
    root.setAttribute('data-name', name);
    var top = el('div', 'top', root);
    c = {
      root: root,
      name: el('span', 'name', top),
      badge: el('span', 'badge', top),
      url: el('div', 'url', root),
      phase: el('div', 'phase', root),
      bar: el('div', 'bar', root),
      eta: el('div', 'eta', root),
      reason: el('div', 'reason', root),
      log: el('div', 'log', root),
      proc: el('div', 'proc', root),
      remedy: el('div', 'remedy', root),
      meta: el('div', 'meta', root)
    };
    c.fill = el('div', 'fill', c.bar);
    c.mark = el('span', 'mark');
    c.mark.textContent = 'straggler';
    c.mark.hidden = true;
    top.insertBefore(c.mark, c.badge);
    c.serve = servingCard(root, c.reason);
    c.inflight = el('span', 'inflight', c.meta);
    c.hitRate = el('span', 'hit-rate', c.meta);
    c.kvEvents = el('span', 'kv-events', c.meta);
    c.since = el('span', 'since', c.meta);
    c.name.textContent = name;
    cards.set(name, c);
    grid.appendChild(root);
    return c;
  }

  function render(b) {
    var c = card(b.name);
    c.root.className = 'card ' + colourClass(b);
    c.root.setAttribute('data-state', b.state);
    c.name.title = b.name;
    c.badge.textContent = b.state === 'starting' && b.reason === 'stalled' ? 'stalled' : b.state;
    c.url.textContent = b.url + (b.kind && b.kind !== 'sglang' ? ' \\u00b7 ' + b.kind : '') + (b.models && b.models.length ? ' \\u00b7 ' + b.models[0] : '');
    var phase = phaseWords(b);
    if (b.state === 'ready') phase = b.ready_seconds != null ? 'ready in ' + duration(b.ready_seconds) : 'ready';
    else if (phase && b.state === 'failed') phase = 'stopped at ' + phase;
    c.phase.textContent = phase;
    var ratio = b.state === 'ready' ? 1 : b.progress && b.progress.total > 0 ? b.progress.done / b.progress.total : 0;
    c.fill.style.width = (ratio * 100).toFixed(1) + '%';
    c.bar.hidden = !(b.state === 'ready' || b.progress);
    var eta = '';
    if (b.progress && b.state === 'starting') {
      eta = Math.floor(ratio * 100) + '%';
      if (b.eta_seconds != null) eta += ' \\u00b7 ETA ' + duration(b.eta_seconds);
    }
    c.eta.textContent = eta;
    c.eta.hidden = eta === '';
    c.reason.textContent = b.reason || '';
    c.reason.hidden = !b.reason;
    c.log.textContent = b.last_log_line || '';
    c.log.title = b.last_log_line || '';
    c.log.hidden = !b.last_log_line || b.state === 'ready';
    c.inflight.textContent = b.inflight + ' in flight';
    renderServe(b, c);
    renderProcess(b, c);
    c.hitRate.textContent = b.cache_hit_rate != null ? 'cache hit ' + Math.round(b.cache_hit_rate * 100) + '%' : '';
    c.hitRate.hidden = b.cache_hit_rate == null;
    renderKvEvents(b, c);
    tickCard(b, c);
  }

  // The engines' KV-cache events (kv-aware): live, stale (a gap not replayed) or off, and the blocks
  // fleetgate's map holds for the backend. Shown once any backend's events are not off.
  function kvShown() {
    var shown = false;
    backends.forEach(function (b) { if (b.kv_events && b.kv_events.state !== 'off') shown = true; });
    return shown;
  }
  function renderKvEvents(b, c) {
    var kv = b.kv_events;
    c.kvEvents.hidden = !kv || !kvShown();
    if (!kv) return;
    c.kvEvents.setAttribute('data-kv', kv.state);
    c.kvEvents.textContent = 'KV events ' + kv.state + (kv.state === 'off' ? '' : ' \u00b7 ' + kv.blocks.toLocaleString('en-US') + ' blocks');
  }

  // The serving view: last-minute rates and the backend's own load report, per card.
  function rate(v) {
    if (v === 0) return '0';
    if (v >= 100) return Math.round(v).toLocaleString('en-US');
    return v >= 10 ? v.toFixed(1) : v.toFixed(2);
  }
  function ms(seconds) {
    if (seconds == null) return '\u2013';
    if (seconds < 0.01) return (seconds * 1000).toFixed(1) + ' ms';
    if (seconds < 10) return Math.round(seconds * 1000) + ' ms';
    return seconds.toFixed(1) + ' s';
  }
  function servingCard(root, before) {
    var s = { root: el('div', 'serve') };
    root.insertBefore(s.root, before);
    s.rates = el('div', 'rates', s.root);
    s.latency = el('div', 'latency', s.root);
    s.thinking = el('div', 'thinking', s.root);
    var line = el('div', 'line', s.root);
    s.load = el('span', 'load', line);
    s.kv = el('span', 'kv', line);
    s.kvText = el('span', '', s.kv);
    s.kvFill = el('div', 'kvfill', el('div', 'kvbar', s.kv));
    s.slow = el('div', 'slow', s.root);
    return s;
  }
  function figure(parent, value, unit) {
    var b = el('b', '', parent);
    b.textContent = value;
    parent.appendChild(document.createTextNode(unit));
  }
  function renderServe(b, c) {
    var f = servingBy.get(b.name);
    var shown = !!f && (b.state === 'ready' || f.requests_per_second > 0 || f.tokens_per_second > 0);
    c.serve.root.hidden = !shown;
    var slow = shown && f.straggler;
    c.mark.hidden = !slow;
    c.root.classList.toggle('straggler', slow);
    if (!shown) return;
    var s = c.serve;
    s.rates.textContent = '';
    figure(s.rates, rate(f.tokens_per_second), ' tok/s');
    s.rates.appendChild(document.createTextNode('\u2003'));
    figure(s.rates, rate(f.requests_per_second), ' req/s');
    s.latency.hidden = f.ttft_p50_seconds == null && f.inter_token_p50_seconds == null;
    s.latency.textContent = 'p50 TTFT ' + ms(f.ttft_p50_seconds) + ' \u00b7 inter-token ' + ms(f.inter_token_p50_seconds);
    // Reasoning tokens over output tokens: shown once the backend's answers reasoned in the window.
    var think = f.thinking_share;
    s.thinking.hidden = !(think > 0);
    s.thinking.textContent = think > 0 ? 'thinking ' + Math.round(think * 100) + '% of output tokens' : '';
    s.load.textContent = f.running == null ? 'no load report' : f.running + ' running \u00b7 ' + f.queued + ' queued';
    s.kv.hidden = f.kv_cache_usage == null;
    if (f.kv_cache_usage != null) {
      var pct = Math.round(f.kv_cache_usage * 100);
      s.kvText.textContent = 'KV ' + pct + '%';
      s.kvFill.style.width = Math.min(100, pct) + '%';
      s.kv.classList.toggle('full', f.kv_cache_usage >= 0.9);
    }
    s.slow.hidden = !slow;
    s.slow.textContent = slow
      ? rate(f.tokens_per_second_per_request) + ' tok/s per running request: below ' + STRAGGLER_RATIO +
        '\u00d7 the fleet median'
      : '';
  }
  function renderFleetServing(fleet) {
    servingEl.hidden = !fleet;
    if (!fleet) return;
    servingEl.textContent = '';
    function chip(cls, value, unit) {
      figure(el('span', cls, servingEl), value, unit);
    }
    chip('', rate(fleet.tokens_per_second), 'tok/s');
    chip('', rate(fleet.requests_per_second), 'req/s');
    chip(fleet.waiting > 0 ? 'warn' : '', String(fleet.waiting), 'waiting');
    chip(fleet.retries > 0 ? 'warn' : '', String(fleet.retries), fleet.retries === 1 ? 'retry' : 'retries');
    chip(fleet.resumes > 0 ? 'warn' : '', String(fleet.resumes || 0), fleet.resumes === 1 ? 'resume' : 'resumes');
    chip(fleet.errors > 0 ? 'bad' : '', String(fleet.errors), fleet.errors === 1 ? 'error' : 'errors');
    el('span', 'window', servingEl).textContent = 'in the last ' + fleet.window_seconds + ' s';
  }
  function serving(view) {
    servingBy.clear();
    Object.keys(view.backends).forEach(function (name) { servingBy.set(name, view.backends[name]); });
    renderFleetServing(view.fleet);
    backends.forEach(function (b) { var c = cards.get(b.name); if (c) renderServe(b, c); });
  }

  // Engines started by fleetgate launch: pid, restarts, last exit, next restart, remedy applied.
  function renderProcess(b, c) {
    var s = b.supervision;
    c.proc.hidden = !s;
    c.remedy.hidden = !s || !s.remedy;
    if (!s) return;
    var parts = [s.pid != null ? 'pid ' + s.pid : 'not running', 'restarts ' + s.restarts];
    if (s.last_exit) parts.push('last exit ' + (s.last_exit.signal || 'code ' + s.last_exit.code));
    if (s.next_restart_at) parts.push('restart at ' + new Date(s.next_restart_at).toLocaleTimeString());
    c.proc.textContent = parts.join(' \u00b7 ');
    c.remedy.textContent = s.remedy ? 'remedy: ' + s.remedy : '';
  }

  function tickCard(b, c) {
    var since = Date.parse(b.since);
    c.since.textContent = b.state + ' for ' + duration((Date.now() - since) / 1000);
  }

  function renderSummary() {
    var list = Array.from(backends.values());
    var ready = 0, inflight = 0, counts = {}, phases = new Map();
    list.forEach(function (b) {
      inflight += b.inflight;
      if (b.state === 'ready') { ready++; return; }
      if (b.state === 'starting' && b.phase) {
        var key = PHASES[b.phase] || b.phase.replace(/_/g, ' ');
        var group = phases.get(key) || [];
        group.push(b);
        phases.set(key, group);
        return;
      }
      counts[b.state] = (counts[b.state] || 0) + 1;
    });
    var parts = [ready + '/' + list.length + ' ready'];
    ORDER.forEach(function (state) { if (counts[state]) parts.push(counts[state] + ' ' + state); });
    phases.forEach(function (group, words) {
      var p = group.length === 1 ? group[0].progress : null;
      parts.push(group.length + ' ' + words + (p ? ' ' + p.done + '/' + p.total : ''));
    });
    var text = parts.join(', ');
    var queued = Object.keys(waiting).map(function (name) { return waiting[name] + ' ' + name; });
    var total = Object.keys(waiting).reduce(function (sum, name) { return sum + waiting[name]; }, 0);
    summaryEl.textContent = text + (inflight ? ' \\u00b7 ' + inflight + ' in flight' : '') +
      (total ? ' \\u00b7 waiting: ' + queued.join(', ') : '');
    summaryEl.className = ready < minReady ? 'low' : '';
    document.title = ready + '/' + list.length + ' ready \\u00b7 fleetgate';
    empty.hidden = list.length > 0;
    while (fleetbar.children.length > list.length) fleetbar.removeChild(fleetbar.lastChild);
    while (fleetbar.children.length < list.length) el('span', '', fleetbar);
    list.forEach(function (b, i) {
      var seg = fleetbar.children[i];
      seg.className = colourClass(b);
      seg.title = b.name + ': ' + b.state;
    });
  }

  function remove(name) {
    backends.delete(name);
    var c = cards.get(name);
    if (c) grid.removeChild(c.root);
    cards.delete(name);
  }

  function snapshot(status) {
    minReady = status.min_ready;
    servingBy.clear();
    status.backends.forEach(function (b) { if (b.serving) servingBy.set(b.name, b.serving); });
    renderFleetServing(status.serving);
    waiting = status.waiting || {};
    var seen = new Set();
    status.backends.forEach(function (b) { seen.add(b.name); });
    Array.from(backends.keys()).forEach(function (name) { if (!seen.has(name)) remove(name); });
    backends.clear();
    // Every backend first: a card's KV-events line depends on the others' (kvShown).
    status.backends.forEach(function (b) { backends.set(b.name, b); });
    status.backends.forEach(function (b) {
      render(b);
      grid.appendChild(cards.get(b.name).root);
    });
    renderSummary();
  }

  function setConn(state, text) {
    connEl.className = state;
    connEl.textContent = text;
  }

  var source = null;
  function connect() {
    source = new EventSource('fleet/events');
    source.addEventListener('open', function () { setConn('live', 'live'); });
    source.addEventListener('snapshot', function (e) { snapshot(JSON.parse(e.data)); });
    source.addEventListener('backend', function (e) {
      var b = JSON.parse(e.data);
      backends.set(b.name, b);
      render(b);
      renderSummary();
    });
    source.addEventListener('removed', function (e) {
      remove(JSON.parse(e.data).name);
      renderSummary();
    });
    source.addEventListener('summary', function (e) {
      var s = JSON.parse(e.data);
      minReady = s.min_ready;
      waiting = s.waiting || {};
      Object.keys(s.inflight).forEach(function (name) {
        var b = backends.get(name);
        if (b && b.inflight !== s.inflight[name]) { b.inflight = s.inflight[name]; render(b); }
      });
      Object.keys(s.cache_hit_rate || {}).forEach(function (name) {
        var b = backends.get(name);
        if (b && b.cache_hit_rate !== s.cache_hit_rate[name]) { b.cache_hit_rate = s.cache_hit_rate[name]; render(b); }
      });
      var kvChanged = false;
      Object.keys(s.kv_events || {}).forEach(function (name) {
        var b = backends.get(name);
        var kv = s.kv_events[name];
        if (b && (!b.kv_events || b.kv_events.state !== kv.state || b.kv_events.blocks !== kv.blocks)) { b.kv_events = kv; kvChanged = true; }
      });
      // One backend going live shows the line on every card: redraw them all.
      if (kvChanged) backends.forEach(render);
      renderSummary();
    });
    source.addEventListener('serving', function (e) { serving(JSON.parse(e.data)); });
    source.addEventListener('error', function () {
      if (source.readyState === EventSource.CLOSED) {
        // The browser gives up on a non-200 answer (fleetgate restarting behind a proxy): retry ourselves.
        setConn('lost', 'disconnected, retrying');
        source.close();
        setTimeout(connect, 3000);
      } else {
        setConn('lost', 'reconnecting');
      }
    });
  }

  setInterval(function () {
    backends.forEach(function (b) { var c = cards.get(b.name); if (c) tickCard(b, c); });
  }, 1000);

  // Batch API jobs under way (GET fleet/batches; absent with batch.enabled false).
  var batchesEl = document.getElementById('batches');
  function batches() {
    fetch('fleet/batches').then(function (r) { return r.ok ? r.json() : { batches: [] }; }).then(function (body) {
      var running = body.batches || [];
      batchesEl.hidden = running.length === 0;
      batchesEl.textContent = running.map(function (b) {
        var done = b.completed + b.failed;
        var pct = b.total ? Math.floor(100 * done / b.total) : 0;
        return 'batch ' + b.id + ' ' + b.status + ': ' + done + '/' + b.total + ' (' + pct + '%)' +
          (b.failed ? ', ' + b.failed + ' failed' : '');
      }).join(' \u00b7 ');
    }).catch(function () {});
  }
  batches();
  setInterval(batches, 5000);
  connect();
})();
`
  .replace('__PHASE_WORDS__', JSON.stringify(PHASE_WORDS))
  .replace('__STRAGGLER_RATIO__', String(STRAGGLER_RATIO));

export const STATUS_PAGE_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>fleetgate</title>
<link rel="icon" href="data:,">
<style>${STYLE}</style>
</head>
<body>
<header>
  <div class="head"><h1>fleetgate</h1><div id="summary">connecting\u2026</div><div id="conn">connecting</div></div>
  <div id="serving" hidden></div>
  <div id="batches" hidden></div>
  <div id="fleetbar"></div>
</header>
<main id="grid"></main>
<div id="empty" hidden>No backends configured.</div>
<script>${SCRIPT}</script>
</body>
</html>
`;

function sha256(text: string): string {
  return `'sha256-${createHash('sha256').update(text, 'utf8').digest('base64')}'`;
}

export const STATUS_PAGE_HEADERS: Readonly<Record<string, string>> = {
  'content-type': 'text/html; charset=utf-8',
  'cache-control': 'no-cache',
  'x-content-type-options': 'nosniff',
  // The favicon is an inline data: URL so the browser never asks fleetgate for /favicon.ico, which
  // would be proxied to a backend (and held in the queue while none is ready).
  'content-security-policy': [
    "default-src 'none'",
    `script-src ${sha256(SCRIPT)}`,
    `style-src ${sha256(STYLE)}`,
    "connect-src 'self'",
    'img-src data:',
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; '),
};
