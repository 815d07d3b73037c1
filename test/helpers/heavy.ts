/**
 * The heavy cases prove sizes, faults, timings and scripts, not the Node runtime: a 1 GB upload,
 * outputs over 512 MiB, the CI soak and the check of its ledger, the benches' smoke runs, and the
 * cases that mostly wait out real time (the demo's minute, 30 s idle as shipped, batch leases
 * running out, PostgreSQL restarted). `npm test` skips them, so that it stays within 7 minutes on 2
 * cores; `npm run test:heavy` (scripts/heavy-tests.sh, FLEETGATE_HEAVY_TESTS=1) runs every file
 * that has one, and CI runs it once, on Node 20 (`.ci/run`).
 */
export const HEAVY = {
  skip:
    process.env.FLEETGATE_HEAVY_TESTS === '1'
      ? false
      : 'a heavy case: npm run test:heavy runs it (FLEETGATE_HEAVY_TESTS=1), as CI does',
};
