/** The soak's end table as text: the ledger, the faults by kind, and fleetgate's resources first vs last minute. */
import type { SoakResult } from './soak.js';

const pct = (x: number) => `${(x * 100).toFixed(2)}%`;

export function renderTable(result: Pick<SoakResult, 'table' | 'faultKinds' | 'faults' | 'resources'>): string {
  const { table, resources } = result;
  const lines = [
    'ledger',
    `  sent                 ${table.sent}`,
    `  completed whole      ${table.completedWhole}`,
    `  completed with gap   ${table.completedWithGap}`,
    `  clear errors         ${table.clearErrors} (${pct(table.errorShare)} of sent)`,
    ...Object.entries(table.errorsByType).map(([type, n]) => `    ${type.padEnd(24)} ${n}`),
    `  aborted by client    ${table.abortedByClient}`,
    `  unclear              ${table.unclear}`,
    ...Object.entries(table.unclearByWhat).map(([what, n]) => `    ${what.padEnd(24)} ${n}`),
    `  lost                 ${table.lost}`,
    `  duplicated           ${table.duplicated}`,
    `  stuck                ${table.stuck}`,
    `faults: ${result.faults.length} (${Object.entries(result.faultKinds)
      .map(([kind, n]) => `${kind} ${n}`)
      .join(', ')})`,
    'fleetgate resources   first minute   last minute   growth',
    `  RSS MiB             ${resources.firstMinute.rssMiB.toFixed(1).padStart(12)}   ${resources.lastMinute.rssMiB.toFixed(1).padStart(11)}   ${pct(resources.growth.rss)}`,
    `  heap used MiB       ${resources.firstMinute.heapUsedMiB.toFixed(1).padStart(12)}   ${resources.lastMinute.heapUsedMiB.toFixed(1).padStart(11)}   ${pct(resources.growth.heapUsed)}`,
    `  open fds            ${resources.firstMinute.openFds.toFixed(1).padStart(12)}   ${resources.lastMinute.openFds.toFixed(1).padStart(11)}   ${pct(resources.growth.openFds)}`,
    `  active handles      ${resources.firstMinute.activeHandles.toFixed(1).padStart(12)}   ${resources.lastMinute.activeHandles.toFixed(1).padStart(11)}   ${pct(resources.growth.activeHandles)}`,
    `  upstream sockets    ${resources.firstMinute.sockets.toFixed(1).padStart(12)}   ${resources.lastMinute.sockets.toFixed(1).padStart(11)}`,
    `  event-loop p99 ms   ${resources.firstMinute.eventLoopP99Ms.toFixed(1).padStart(12)}   ${resources.lastMinute.eventLoopP99Ms.toFixed(1).padStart(11)}   (worst sample ${resources.maxEventLoopP99Ms.toFixed(1)})`,
  ];
  return lines.join('\n');
}
