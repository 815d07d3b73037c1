/**
 * A file larger than a whole-file read could hold, through the PostgreSQL store: 600 MiB uploaded
 * as a stream, stored in rows, copied to a run's local input and streamed back, the process's
 * memory meanwhile far below the file's size.
 */
import assert from 'node:assert/strict';
import { createReadStream, statSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { test } from 'node:test';
import { PgStore } from '../../src/batch/pg-store.js';
import { tempDir } from '../helpers/batch.js';
import { HEAVY } from '../helpers/heavy.js';
import { startPostgres } from '../helpers/postgres.js';

const MIB = 2 ** 20;
const SIZE = 600 * MIB;

/** `SIZE` bytes of JSONL-like lines, made as read; byte i is a function of i (checked on the way back). */
function generated(): Readable {
  let sent = 0;
  return new Readable({
    read() {
      if (sent >= SIZE) return this.push(null);
      const chunk = Buffer.alloc(Math.min(MIB, SIZE - sent), `line ${sent / MIB}\n`);
      sent += chunk.length;
      this.push(chunk);
    },
  });
}

test(
  '600 MiB through the PostgreSQL store as streams: in, to a run input, back out; memory stays small',
  HEAVY,
  async (t) => {
    const cluster = await startPostgres(t);
    const store = new PgStore(await cluster.createDatabase(), join(tempDir(t), 'cache'));
    t.after(() => store.close());
    let peak = 0;
    const sampler = setInterval(() => {
      peak = Math.max(peak, process.memoryUsage().rss);
    }, 50);
    t.after(() => clearInterval(sampler));

    const id = await store.writeContent(generated());
    const file = await store.describeFile(id, 'big.jsonl', 'batch', 1);
    assert.equal(file.bytes, SIZE);

    let back = 0;
    let firstLine = '';
    for await (const chunk of store.readContent(id) as AsyncIterable<Buffer>) {
      if (back === 0) firstLine = chunk.toString('utf8', 0, 7);
      back += chunk.length;
    }
    assert.equal(back, SIZE, 'every byte streamed back');
    assert.equal(firstLine, 'line 0\n');

    const local = await store.openInput(id);
    assert.equal(statSync(local.path).size, SIZE, 'the run input is whole on disk');
    let tail = '';
    for await (const chunk of createReadStream(local.path, { start: SIZE - 9 }) as AsyncIterable<Buffer>)
      tail += chunk.toString();
    assert.equal(tail, Buffer.alloc(MIB, 'line 599\n').toString('utf8', MIB - 9), 'its last bytes');
    await local.close();
    clearInterval(sampler);
    assert.ok(peak < 400 * MIB, `peak RSS ${Math.round(peak / MIB)} MiB for a ${SIZE / MIB} MiB file`);
  },
);
