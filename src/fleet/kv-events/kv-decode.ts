/**
 * The engines' KV-cache event frames, decoded. SGLang and vLLM publish the same three-frame ZeroMQ
 * message, `[topic, seq as 8 bytes big-endian, msgpack batch]` (docs/sglang-vllm-behaviour.md,
 * "KV-cache events"), but two encodings of the batch: msgspec structs with `array_like=True` (SGLang;
 * vLLM before PR 42892) give positional arrays, `[ts, [events], dp_rank?]` and
 * `["BlockStored", hashes, parent, token_ids, block_size, lora_id, medium, ...]`; without it (vLLM
 * after PR 42892, both levels) maps tagged by `type`. Both are read at both levels, each field by
 * position or by name, unknown trailing fields ignored. Engine hashes come as int64 (SGLang: signed),
 * uint64 (vLLM: may exceed 2^63) or bytes (vLLM's sha256 hashes): each becomes one exact key
 * (`EngineHash`), used only to apply a later `BlockRemoved`. Pure: bytes in, events out.
 */
import { Decoder } from '@msgpack/msgpack';

/** An engine's block hash, exact: a safe integer as itself, a larger one or bytes as a string. */
export type EngineHash = number | string;

export type KvEvent =
  | {
      readonly type: 'stored';
      readonly hashes: readonly EngineHash[];
      readonly parent: EngineHash | null;
      readonly tokens: readonly number[];
      readonly blockSize: number;
      /**
       * Why fleetgate cannot key these blocks by their tokens alone, or null: a LoRA adapter, extra
       * keys (multimodal hashes, cache salt), a storage tier other than the GPU's, a group that is
       * not full attention. Such blocks are not recorded.
       */
      readonly unkeyable: string | null;
    }
  | { readonly type: 'removed'; readonly hashes: readonly EngineHash[]; readonly unkeyable: string | null }
  | { readonly type: 'cleared' };

export interface KvBatch {
  readonly ts: number;
  readonly events: readonly KvEvent[];
  readonly dpRank: number | null;
  /** Events of a kind this decoder does not know (a newer engine's), skipped. */
  readonly unknown: number;
}

export interface KvFrame {
  readonly topic: string;
  readonly seq: number;
  readonly payload: Uint8Array;
}

/** Malformed bytes: the frame is dropped and counted, the stream goes on. */
export class KvDecodeError extends Error {}

/** int64/uint64 as bigint, so that no 64-bit hash is rounded; smaller integers stay numbers. */
const decoder = new Decoder({ useBigInt64: true });

/** The three frames of one message: topic, sequence number, payload. */
export function readFrames(frames: readonly Uint8Array[]): KvFrame {
  if (frames.length !== 3) throw new KvDecodeError(`expected 3 frames (topic, seq, payload), got ${frames.length}`);
  return { topic: Buffer.from(frames[0]).toString('utf8'), seq: readSeq(frames[1]), payload: frames[2] };
}

/** An 8-byte big-endian sequence number (-1: the end of a replay). */
export function readSeq(bytes: Uint8Array): number {
  if (bytes.length !== 8) throw new KvDecodeError(`seq frame has ${bytes.length} bytes, not 8`);
  return Number(Buffer.from(bytes.buffer, bytes.byteOffset, 8).readBigInt64BE(0));
}

type Fields = (index: number, name: string) => unknown;

/** A struct's fields by position (array_like) or by name (map), behind one accessor. */
function fieldsOf(value: unknown, what: string): { fields: Fields; tag: unknown } {
  if (Array.isArray(value)) return { fields: (i) => value[i], tag: value[0] };
  if (value instanceof Map) return { fields: (_i, name) => value.get(name), tag: value.get('type') };
  if (value !== null && typeof value === 'object') {
    const record = value as Record<string, unknown>;
    return { fields: (_i, name) => record[name], tag: record.type };
  }
  throw new KvDecodeError(`${what} is neither an array nor a map`);
}

export function decodeBatch(payload: Uint8Array): KvBatch {
  let raw: unknown;
  try {
    raw = decoder.decode(payload);
  } catch (error) {
    throw new KvDecodeError(`not msgpack: ${(error as Error).message}`);
  }
  const { fields } = fieldsOf(raw, 'batch');
  const ts = Number(fields(0, 'ts') ?? 0);
  const list = fields(1, 'events');
  if (!Array.isArray(list)) throw new KvDecodeError('batch has no events list');
  const rank = fields(2, 'data_parallel_rank');
  const events: KvEvent[] = [];
  let unknown = 0;
  for (const item of list) {
    const event = decodeEvent(item);
    if (event === null) unknown++;
    else events.push(event);
  }
  return { ts, events, dpRank: rank === undefined || rank === null ? null : Number(rank), unknown };
}

/** One event in either encoding; null for an unknown tag. Array fields are shifted by the tag. */
function decodeEvent(item: unknown): KvEvent | null {
  const { fields, tag } = fieldsOf(item, 'event');
  const shifted: Fields = (i, name) => fields(i + 1, name);
  switch (tag) {
    case 'BlockStored': {
      const tokens = numbers(shifted(2, 'token_ids'), 'token_ids');
      const hashes = engineHashes(shifted(0, 'block_hashes'));
      const parent = shifted(1, 'parent_block_hash');
      const blockSize = Number(shifted(3, 'block_size'));
      if (!Number.isInteger(blockSize) || blockSize < 1) throw new KvDecodeError('BlockStored without a block_size');
      return {
        type: 'stored',
        hashes,
        parent: parent === null || parent === undefined ? null : engineHash(parent),
        tokens,
        blockSize,
        unkeyable: unkeyableStore(shifted),
      };
    }
    case 'BlockRemoved':
      return {
        type: 'removed',
        hashes: engineHashes(shifted(0, 'block_hashes')),
        unkeyable: otherMedium(shifted(1, 'medium')),
      };
    case 'AllBlocksCleared':
      return { type: 'cleared' };
    default:
      if (typeof tag !== 'string') throw new KvDecodeError('event without a type tag');
      return null;
  }
}

function otherMedium(medium: unknown): string | null {
  return medium === undefined || medium === null || String(medium).toUpperCase() === 'GPU'
    ? null
    : `medium ${String(medium)}`;
}

/** Positional: lora_id 4, medium 5, lora_name 6, extra_keys 7, group_idx 8, kv_cache_spec_kind 9 (vLLM's order). */
function unkeyableStore(fields: Fields): string | null {
  const lora = fields(4, 'lora_id') ?? fields(6, 'lora_name');
  if (lora !== undefined && lora !== null) return 'LoRA';
  const medium = otherMedium(fields(5, 'medium'));
  if (medium !== null) return medium;
  const extra = fields(7, 'extra_keys');
  if (Array.isArray(extra) && extra.some((k) => k !== null && k !== undefined)) return 'extra keys';
  const group = fields(8, 'group_idx');
  const kind = fields(9, 'kv_cache_spec_kind');
  if (
    (group !== undefined && group !== null && Number(group) !== 0) ||
    (typeof kind === 'string' && kind !== 'full_attention')
  )
    return 'not the full-attention group';
  return null;
}

function numbers(value: unknown, what: string): number[] {
  if (!Array.isArray(value)) throw new KvDecodeError(`${what} is not a list`);
  const out: number[] = new Array(value.length);
  for (let i = 0; i < value.length; i++) {
    const v = value[i];
    out[i] = typeof v === 'bigint' ? Number(v) : (v as number);
    if (typeof out[i] !== 'number') throw new KvDecodeError(`${what}[${i}] is not an integer`);
  }
  return out;
}

function engineHashes(value: unknown): EngineHash[] {
  if (!Array.isArray(value)) throw new KvDecodeError('block_hashes is not a list');
  return value.map(engineHash);
}

function engineHash(value: unknown): EngineHash {
  if (typeof value === 'number') return value;
  if (typeof value === 'bigint') return Number.isSafeInteger(Number(value)) ? Number(value) : value.toString();
  if (value instanceof Uint8Array) return `x${Buffer.from(value).toString('hex')}`;
  throw new KvDecodeError(`a block hash is a ${typeof value}`);
}
