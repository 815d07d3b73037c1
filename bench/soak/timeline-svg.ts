/**
 * The soak's picture: one SVG with ready backends, in-flight requests, queued requests and client
 * errors over time (one lane each), and a vertical mark where each fault struck, labelled with its
 * kind. Pure: data in, SVG text out; no chart library.
 */
import type { ResourceSample } from './resources.js';

interface TimelineFault {
  atMs: number;
  kind: string;
  target: string | null;
}

export interface TimelineInput {
  title: string;
  durationMs: number;
  samples: readonly ResourceSample[];
  /** Times (since start) at which clients received a clear error. */
  errorTimesMs: readonly number[];
  faults: readonly TimelineFault[];
}

const WIDTH = 1200;
const LANE = 110;
const LEFT = 130;
const RIGHT = 20;
const TOP = 40;

const COLORS: Record<string, string> = {
  sigkill: '#d62728',
  sigstop: '#9467bd',
  dp_rank_dead: '#8c564b',
  scheduler_dead: '#e377c2',
  startup_oom: '#ff7f0e',
  sighup: '#17becf',
  drain: '#2ca02c',
  slow_readers: '#7f7f7f',
  client_aborts: '#bcbd22',
};

function xmlText(text: string): string {
  return text.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;');
}

export function timelineSvg(input: TimelineInput): string {
  const plotWidth = WIDTH - LEFT - RIGHT;
  const x = (ms: number) => LEFT + (Math.max(0, Math.min(ms, input.durationMs)) / input.durationMs) * plotWidth;
  const bucketMs = 5_000;
  const errorBuckets = new Array(Math.ceil(input.durationMs / bucketMs) + 1).fill(0);
  for (const t of input.errorTimesMs) errorBuckets[Math.floor(Math.max(0, t) / bucketMs)]++;
  const lanes: Array<{ label: string; points: Array<[number, number]>; color: string }> = [
    { label: 'ready backends', points: input.samples.map((s) => [s.tMs, s.readyBackends]), color: '#2ca02c' },
    { label: 'in flight', points: input.samples.map((s) => [s.tMs, s.inflight]), color: '#1f77b4' },
    { label: 'queued', points: input.samples.map((s) => [s.tMs, s.queued]), color: '#ff7f0e' },
    {
      label: 'client errors / 5 s',
      points: errorBuckets.map((n, i) => [i * bucketMs, n]),
      color: '#d62728',
    },
  ];
  const height = TOP + lanes.length * LANE + 40;
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" font-family="sans-serif" font-size="11">`,
    `<title>${xmlText(input.title)}</title>`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="${LEFT}" y="20" font-size="14">${xmlText(input.title)}</text>`,
  ];
  lanes.forEach((lane, i) => {
    const top = TOP + i * LANE;
    const bottom = top + LANE - 20;
    const values = lane.points.map(([, v]) => v).filter(Number.isFinite);
    const max = Math.max(1, ...values);
    const y = (v: number) => bottom - (v / max) * (bottom - top);
    out.push(`<line x1="${LEFT}" y1="${bottom}" x2="${WIDTH - RIGHT}" y2="${bottom}" stroke="#ccc"/>`);
    out.push(`<text x="8" y="${top + 14}">${xmlText(lane.label)}</text>`);
    out.push(`<text x="8" y="${top + 28}" fill="#666">max ${max}</text>`);
    const path = lane.points
      .filter(([, v]) => Number.isFinite(v))
      .map(([t, v], j) => `${j === 0 ? 'M' : 'L'}${x(t).toFixed(1)},${y(v).toFixed(1)}`)
      .join(' ');
    if (path !== '') out.push(`<path d="${path}" fill="none" stroke="${lane.color}" stroke-width="1.5"/>`);
  });
  const plotBottom = TOP + lanes.length * LANE - 20;
  for (const fault of input.faults) {
    const fx = x(fault.atMs).toFixed(1);
    const color = COLORS[fault.kind] ?? '#000';
    const label = fault.target === null ? fault.kind : `${fault.kind} ${fault.target}`;
    out.push(
      `<line x1="${fx}" y1="${TOP - 4}" x2="${fx}" y2="${plotBottom}" stroke="${color}" stroke-dasharray="3,3"><title>${xmlText(label)} at ${(fault.atMs / 1000).toFixed(1)} s</title></line>`,
    );
    out.push(
      `<text x="${fx}" y="${plotBottom + 12}" fill="${color}" font-size="9" transform="rotate(30 ${fx} ${plotBottom + 12})">${xmlText(label)}</text>`,
    );
  }
  for (let s = 0; s <= input.durationMs / 1000; s += 60) {
    out.push(`<text x="${x(s * 1000).toFixed(1)}" y="${TOP - 8}" fill="#666">${s / 60} min</text>`);
  }
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}
