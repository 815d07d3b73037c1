/**
 * The heavy cases (a 1 GB upload, outputs over 512 MiB, the CI soak and the check of its ledger, the
 * benches' smoke runs) prove sizes, faults and scripts, not the Node runtime: `.ci/run` runs them in
 * its first pass (Node 20) and sets FLEETGATE_HEAVY_TESTS=0 for its second (Node 22). `npm test` runs them.
 */
export const HEAVY = {
  skip:
    process.env.FLEETGATE_HEAVY_TESTS === '0'
      ? 'a heavy case: run once, in the first CI pass (FLEETGATE_HEAVY_TESTS=0 here)'
      : false,
};
