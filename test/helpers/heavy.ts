/**
 * The heavy cases prove sizes, faults, timings and scripts, not the Node runtime: a 1 GB upload,
 * outputs over 512 MiB, the CI soak and the check of its ledger, the benches' smoke runs, and the
 * cases that mostly wait out real time (the demo's minute, 30 s idle as shipped, batch leases
 * running out, PostgreSQL restarted). They live in test/heavy/, only they, each file run in its own
 * process (some measure their process's memory). `npm test` leaves them out, so that it stays within
 * 7 minutes on 2 cores; with FLEETGATE_HEAVY_TESTS=1 they run: `npm run test:heavy` (them alone), and
 * CI's first pass (`FLEETGATE_HEAVY_TESTS=1 npm test`, `.ci/run`), where `test:all` adds test/heavy/.
 */
export const HEAVY = {
  skip:
    process.env.FLEETGATE_HEAVY_TESTS === '1'
      ? false
      : 'a heavy case: FLEETGATE_HEAVY_TESTS=1 runs it (npm run test:heavy), as CI does',
};
