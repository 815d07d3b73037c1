/** The wait queue's classes from `queue.*`: a class's own limits, or the queue's where it sets none. */
import type { Config } from '../config/types.js';
import { QUEUE_ALLOWANCE } from './adaptive-cap.js';
import type { QueueClass } from './class-queue.js';
import type { WaitQueueOptions } from './wait-queue.js';

type ClassOptions = Pick<WaitQueueOptions, 'classes' | 'defaultClass' | 'maxStarvationMs' | 'reserve' | 'headroom'>;

export function queueClassOptions(config: Config): ClassOptions {
  const { queue } = config;
  const adaptive = config.routing.max_inflight_per_backend === 'auto';
  const classes: QueueClass[] = queue.classes.map((cls) => ({
    name: cls.name,
    maxWaiting: cls.max_waiting ?? queue.max_waiting,
    timeoutMs: cls.timeout ?? queue.timeout,
    // Under the adaptive cap a batch job's surplus waits here as long as it takes; a timeout set for
    // the class itself is meant as a bound on any wait.
    timeoutOnlyWhenNoneReady: adaptive && cls.timeout === null,
  }));
  return {
    classes,
    defaultClass: queue.default_class,
    maxStarvationMs: queue.max_starvation,
    reserve: queue.reserve,
    headroom: topClassHeadroom(config),
  };
}

/**
 * Slots of each adaptive cap above what the backend runs (its queue allowance) that only the highest
 * class may fill, so that lower classes never wait in a backend's own queue, which fleetgate does not
 * order, in front of a top-class request (docs/decisions.md, "Room at the backend for the top class").
 * Only with the adaptive cap, whose top QUEUE_ALLOWANCE slots are known to be queue, and with classes.
 */
export function topClassHeadroom(config: Config): number {
  const adaptive = config.routing.max_inflight_per_backend === 'auto';
  return adaptive && config.queue.classes.length > 1 ? QUEUE_ALLOWANCE : 0;
}

/** Slots of each cap lower classes may not fill: the headroom and `queue.reserve` (for the cap's growth rule). */
export function capHeldBack(config: Config): number {
  return config.queue.classes.length > 1 ? topClassHeadroom(config) + config.queue.reserve : 0;
}
