/** A scheduler whose time moves only when the test runs it. */
export function manualClock() {
  let now = 0;
  let tasks: { at: number; fn: () => void; id: number }[] = [];
  let ids = 0;
  return {
    now: () => now,
    schedule: (fn: () => void, ms: number) => {
      const id = ids++;
      tasks.push({ at: now + ms, fn, id });
      return () => {
        tasks = tasks.filter((task) => task.id !== id);
      };
    },
    /** Runs tasks in time order until none is left or `until` returns true (bounded). */
    run(until: () => boolean = () => false) {
      for (let i = 0; i < 100_000 && tasks.length > 0 && !until(); i++) {
        tasks.sort((a, b) => a.at - b.at || a.id - b.id);
        const task = tasks.shift() as (typeof tasks)[number];
        now = task.at;
        task.fn();
      }
    },
  };
}
