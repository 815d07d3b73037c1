/** `fleetgate launch`: `fleetgate serve` with the engines of the config's `launch:` section started and supervised. */
import { runGateway } from './serve.js';

export function run(argv: string[]): Promise<number> {
  return runGateway(argv, { launch: true });
}
