/** The wait queue's classes from `queue.*`: a class's own limits, or the queue's where it sets none. */
import type { Config } from '../../config/types.js';
import type { QueueClass } from './class-queue.js';
import type { WaitQueueOptions } from './wait-queue.js';

type ClassOptions = Pick<WaitQueueOptions, 'classes' | 'defaultClass' | 'maxStarvationMs' | 'reserve'>;

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
  return { classes, defaultClass: queue.default_class, maxStarvationMs: queue.max_starvation, reserve: queue.reserve };
}
