/**
 * The heavy cases prove sizes, faults, timings and scripts, not the Node runtime: a 1 GB upload,
 * outputs over 512 MiB, the CI soak and the check of its ledger, the benches' smoke runs, and the
 * cases that mostly wait out real time (the demo's minute, 30 s idle as shipped, batch leases
 * running out, PostgreSQL restarted). Their files live in test/heavy/, each run in its own process
 * (some measure their process's memory). `npm test` skips the heavy cases, so that it stays within 7
 * minutes on 2 cores; FLEETGATE_HEAVY_TESTS=1 runs them: `npm run test:heavy` (those files alone),
 * and CI's first pass (`FLEETGATE_HEAVY_TESTS=1 npm test`, `.ci/run`).
 */
export const HEAVY = {
  skip:
    process.env.FLEETGATE_HEAVY_TESTS === '1'
      ? false
      : 'a heavy case: FLEETGATE_HEAVY_TESTS=1 runs it (npm run test:heavy), as CI does',
};
