/**
 * Ports for servers that listen later (a loading SGLang opens its port only after minutes, a sim
 * after its start-up script). A port from `listen(0)` comes from the kernel's ephemeral range, the
 * range it also hands to outgoing connections: while the sim is still "loading", any client socket
 * of a test running beside it may take that port, and the sim's later `listen` fails with
 * EADDRINUSE. So ports come from just below the ephemeral range, which the kernel never gives to
 * clients, each process starting at its own offset so that test files running side by side rarely
 * meet, and each checked free before it is handed out.
 */
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { networkInterfaces } from 'node:os';

const SPAN = 12_000;

function ephemeralStart(): number {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    if (Number.isInteger(low) && low > SPAN + 1024) return low;
  } catch {
    // Not Linux: take the IANA dynamic range's start.
  }
  return 49_152;
}

const HIGH = ephemeralStart();
const LOW = HIGH - SPAN;
let next = LOW + ((process.pid * 7_919) % SPAN);

/** Whether `port` can be listened on right now. */
export async function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** The first of `n` consecutive ports that were free a moment ago. */
export async function freePortRange(n: number): Promise<number> {
  for (let tries = 0; tries < SPAN; tries++) {
    if (next + n > HIGH) next = LOW;
    const base = next;
    next += n;
    const checks = await Promise.all(Array.from({ length: n }, (_, i) => portFree(base + i)));
    if (checks.every(Boolean)) return base;
  }
  throw new Error(`no ${n} free consecutive ports in ${LOW}-${HIGH}`);
}

/** A port that was free a moment ago. */
export async function freePort(): Promise<number> {
  return freePortRange(1);
}

export async function freePorts(n: number): Promise<number[]> {
  const ports: number[] = [];
  while (ports.length < n) ports.push(await freePort());
  return ports;
}

/** This machine's own non-loopback address of `family`, or null: a real non-loopback TCP peer for admin tests. */
export function nonLoopbackAddress(family: 'IPv4' | 'IPv6'): string | null {
  for (const list of Object.values(networkInterfaces())) {
    for (const entry of list ?? []) {
      if (entry.family === family && !entry.internal && !entry.address.startsWith('fe80')) return entry.address;
    }
  }
  return null;
}
