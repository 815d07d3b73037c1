import { runShard } from '../helpers/shard.js';

await runShard(import.meta.url);
