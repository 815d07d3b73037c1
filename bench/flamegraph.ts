/**
 * Draws folded stacks (`frame;frame;frame value` per line, as `bench/profile-summary.ts --folded`
 * writes them) as a flame graph in SVG: one box per frame, as wide as the samples under it, callers
 * below their callees; colour by who owns the code (fleetgate, undici, fastify and its plugins, node
 * core, native), so what fleetgate adds stands out. Frames under 0.1 % of the width are left out.
 * Usage:
 *   node --import tsx bench/flamegraph.ts --title TEXT FOLDED_FILE > out.svg
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

interface Frame {
  name: string;
  value: number;
  children: Map<string, Frame>;
}

const WIDTH = 1600;
const ROW = 17;
const TOP = 40;

function tree(text: string): Frame {
  const root: Frame = { name: 'all', value: 0, children: new Map() };
  for (const line of text.split('\n')) {
    const at = line.lastIndexOf(' ');
    if (at < 0) continue;
    const value = Number(line.slice(at + 1));
    if (!Number.isFinite(value) || value <= 0) continue;
    root.value += value;
    let node = root;
    for (const name of line.slice(0, at).split(';')) {
      let child = node.children.get(name);
      if (child === undefined) {
        child = { name, value: 0, children: new Map() };
        node.children.set(name, child);
      }
      child.value += value;
      node = child;
    }
  }
  return root;
}

function colour(name: string): string {
  if (name.includes('_fleetgate_')) return '#f28e2b';
  if (name.includes('undici/')) return '#4e79a7';
  if (name.includes('fastify') || name.includes('find-my-way') || name.includes('avvio')) return '#59a14f';
  if (name.includes('_node:')) return '#bab0ac';
  if (/^\((garbage_collector|program)\)/.test(name)) return '#e15759';
  return '#d4a6c8';
}

function escapeXml(text: string): string {
  return text.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;');
}

function depthOf(frame: Frame): number {
  let deepest = 0;
  for (const child of frame.children.values()) deepest = Math.max(deepest, depthOf(child));
  return deepest + 1;
}

function main(): void {
  const { values, positionals } = parseArgs({ allowPositionals: true, options: { title: { type: 'string' } } });
  if (positionals.length !== 1) throw new Error('usage: flamegraph.ts [--title TEXT] FOLDED_FILE');
  const root = tree(readFileSync(positionals[0], 'utf8'));
  const height = TOP + depthOf(root) * ROW + 10;
  const scale = WIDTH / Math.max(1, root.value);
  const boxes: string[] = [];
  const draw = (frame: Frame, x: number, depth: number) => {
    const width = frame.value * scale;
    if (width < WIDTH / 1000) return;
    const y = TOP + depth * ROW;
    const share = ((frame.value / root.value) * 100).toFixed(1);
    const label = frame.name.replaceAll('_', ' ');
    const fits = Math.floor((width - 4) / 6.5);
    const text = fits < 3 ? '' : label.length <= fits ? label : `${label.slice(0, fits - 2)}..`;
    boxes.push(
      `<g><title>${escapeXml(label)} (${share}%)</title><rect x="${x.toFixed(2)}" y="${y}" width="${width.toFixed(2)}" height="${ROW - 1}" fill="${colour(frame.name)}"/>` +
        (text === '' ? '' : `<text x="${(x + 2).toFixed(2)}" y="${y + 12}">${escapeXml(text)}</text>`) +
        '</g>',
    );
    let at = x;
    for (const child of [...frame.children.values()].sort((a, b) => b.value - a.value)) {
      draw(child, at, depth + 1);
      at += child.value * scale;
    }
  };
  draw(root, 0, 0);
  const title = escapeXml(values.title ?? positionals[0]);
  const legend = 'orange fleetgate, blue undici, green fastify and plugins, grey node core, red GC and native';
  process.stdout.write(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" font-family="monospace" font-size="11">\n` +
      `<rect width="100%" height="100%" fill="#ffffff"/>\n<text x="4" y="16" font-size="14">${title}</text>\n` +
      `<text x="4" y="32" fill="#555">${legend}</text>\n${boxes.join('\n')}\n</svg>\n`,
  );
}

main();
