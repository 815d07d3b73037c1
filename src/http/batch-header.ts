/**
 * The header fleetgate's own batch (`fleetgate batch`, the Batch API) sends with each request. A
 * batch streams its requests upstream only to keep their work through a crash (docs/batch.md); no
 * one waits on their first byte, and an engine may rightly start them out of order (SGLang admits by
 * longest prefix match), so the progress watchdog's rule for a stream whose first byte is late
 * (a dead DP rank) does not judge them, as it never judged them non-streamed.
 */
export const BATCH_HEADER = 'x-fleetgate-batch';
