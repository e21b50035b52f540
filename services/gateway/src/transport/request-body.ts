import type { IncomingMessage, ServerResponse } from 'node:http';
import { promisify, TextDecoder } from 'node:util';
import { brotliDecompress, gunzip, inflate } from 'node:zlib';
import { ApiError, invalidRequest } from '@oc/contracts';
import typeIs from 'type-is';
import { Allowances } from '../application/allowances';
import { Turns } from '../application/turns';
import { closeLingering } from './lingering-close';
import { readMultipartBody } from './multipart';

/** Bodies over this size (declared, as sent, or inflated) are refused with 413 before they are read further. */
export const MAX_BODY_BYTES = 1024 * 1024;
/** A refused body declared up to this size is read and dropped, and its connection reused; a larger one's is closed, lingering. */
const MAX_DRAINED_BODY_BYTES = 8 * MAX_BODY_BYTES;
/** A body this size or larger (or of unknown size) takes a millisecond or more of the gateway's thread to parse. */
const LARGE_BODY_BYTES = 64 * 1024;
/** What one organization's large bodies may hold of the gateway's memory at once, from their first byte read until parsed. */
export const LARGE_BODY_BYTES_PER_OWNER = 8 * MAX_BODY_BYTES;

/**
 * An organization's large bodies are received side by side and parsed one at a time, each in a later turn of the
 * event loop. Parsing is what costs the gateway's thread (5 ms or so a megabyte): twenty megabyte bodies arriving
 * together would otherwise be parsed back to back ahead of every other organization's requests queued behind them.
 * Waiting on the network holds no turn: a body is given one only once all its bytes are in, so an upload that
 * stalls mid-way, or trickles, delays no other body, its own organization's included (issue 28, finding 2).
 */
const parseTurns = new Turns();
/**
 * Memory: before a byte of a large body is read, its declared length (the 1 MiB limit when chunked) is taken from
 * its organization's allowance, and given back once it is parsed. A body that does not fit waits unread, its bytes
 * left in the socket (backpressure). So an organization opening 1,000 connections each sending 1 MiB slowly holds
 * 8 MiB here; the rest waits in the kernel's socket buffers until its bodies finish or time out
 * (HTTP_REQUEST_TIMEOUT_MS). Its stalled uploads can hold up only its own large bodies, and only once they fill its
 * 8 MiB. Across organizations, a connection reads one body at a time, of at most 1 MiB, and a client address holds
 * at most HTTP_MAX_CONNECTIONS_PER_ADDRESS connections.
 */
const allowances = new Allowances(LARGE_BODY_BYTES_PER_OWNER);

export interface RequestBody {
  value: unknown;
  /** A large body's: ends its organization's parse turn, so that the next one is parsed. */
  endTurn?: () => void;
}

/**
 * The request's body as an object: JSON, or a multipart form for a route that takes one (`files`: the names its file
 * parts may have). `owner`: the organization whose allowance and parse turns a large body takes.
 */
export async function readBody(req: IncomingMessage, res: ServerResponse, owner: string, files: readonly string[] | undefined): Promise<RequestBody> {
  const length = Number(req.headers['content-length'] ?? 0);
  const chunked = req.headers['transfer-encoding'] !== undefined;
  if (length === 0 && !chunked) return { value: {} };
  if (length > MAX_BODY_BYTES) {
    // Refused before reading. Node then reads the rest and drops it, so a client still sending gets to read this
    // answer rather than a broken pipe (`fetch` fails with EPIPE when the connection closes under its upload), and
    // the connection serves on. A body declared larger than that is not worth keeping the connection for: it
    // closes, lingering.
    if (length > MAX_DRAINED_BODY_BYTES) closeLingering(req, res);
    throw tooLarge();
  }
  const parse = parserOf(req, files);
  if (!chunked && length < LARGE_BODY_BYTES) return { value: await parse(await receive(req)) };

  const giveBack = await allowances.take(owner, chunked ? MAX_BODY_BYTES : length);
  try {
    const bytes = await receive(req);
    const endTurn = await parseTurns.turn(owner);
    try {
      return { value: await parse(bytes), endTurn };
    } catch (error) {
      endTurn();
      throw error;
    }
  } finally {
    giveBack();
  }
}

/** How the body's bytes are parsed; what the headers already refuse (another type, charset or encoding) is refused before a byte is read. */
function parserOf(req: IncomingMessage, files: readonly string[] | undefined): (bytes: Buffer) => Promise<unknown> {
  const encoding = (req.headers['content-encoding'] ?? 'identity').toLowerCase();
  const inflate = encoding === 'identity' ? undefined : INFLATERS[encoding];
  if (encoding !== 'identity' && !inflate) {
    throw unsupportedContent(`Unsupported Content-Encoding '${encoding}': send the body as it is, or compressed with gzip, deflate or br.`);
  }
  const inflated = async (bytes: Buffer) => (inflate ? inflateWithin(inflate, bytes, encoding) : bytes);
  if (files !== undefined && typeIs(req, ['multipart/form-data'])) return async (bytes) => readMultipartBody(await inflated(bytes), req.headers, files);
  if (!typeIs(req, ['application/json'])) {
    throw unsupportedContent(`Unsupported Content-Type '${req.headers['content-type'] ?? ''}': send the body as application/json.`);
  }
  const decoder = jsonDecoder(req.headers['content-type']);
  return async (bytes) => parseJson(await inflated(bytes), decoder);
}

/** The body's bytes as they came (compressed or not); 413 past the limit, 400 if the client leaves before its end. */
function receive(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    if (req.destroyed) return reject(unreadable());
    const chunks: Buffer[] = [];
    let size = 0;
    const stop = () => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('close', onClose);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_BODY_BYTES) return void chunks.push(chunk);
      // The rest flows on unread and is dropped, so the client reads its 413.
      stop();
      reject(tooLarge());
    };
    const onEnd = () => {
      stop();
      resolve(Buffer.concat(chunks, size));
    };
    // Closed before its end: the client left, or took longer than HTTP_REQUEST_TIMEOUT_MS.
    const onClose = () => {
      stop();
      reject(unreadable());
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('close', onClose);
  });
}

type Inflate = (bytes: Buffer, options: { maxOutputLength: number }) => Promise<Buffer>;
const INFLATERS: Record<string, Inflate> = { gzip: promisify(gunzip), deflate: promisify(inflate), br: promisify(brotliDecompress) };

/** Counted after decompression: a gzip bomb stops at the limit, in milliseconds. */
async function inflateWithin(inflate: Inflate, bytes: Buffer, encoding: string): Promise<Buffer> {
  try {
    return await inflate(bytes, { maxOutputLength: MAX_BODY_BYTES });
  } catch (error) {
    if ((error as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE') throw tooLarge();
    throw invalidRequest(
      'invalid_body',
      `The request body is not valid '${encoding}' data as its Content-Encoding says: send it compressed that way, or without Content-Encoding.`,
    );
  }
}

/** Decoding keeps no state between bodies: one decoder serves them all. */
const UTF8 = new TextDecoder();

/** The decoder of a JSON body's charset (UTF-8 unless it names another UTF); 415 for any other. */
function jsonDecoder(contentType: string | undefined): TextDecoder {
  const charset = /;\s*charset\s*=\s*"?([^";\s]*)/i.exec(contentType ?? '')?.[1]?.toLowerCase() ?? 'utf-8';
  if (charset === 'utf-8') return UTF8;
  const decoder = charset.startsWith('utf-') ? decoderOf(charset) : undefined;
  if (!decoder) throw unsupportedContent(`Unsupported charset '${charset}': send the body as UTF-8 JSON.`);
  return decoder;
}

/** TextDecoder's labels: UTF-8 and UTF-16; undefined for a charset it does not know. */
function decoderOf(charset: string): TextDecoder | undefined {
  try {
    return new TextDecoder(charset);
  } catch {
    return undefined;
  }
}

/** Only an object or an array at the top (strict JSON); a byte order mark is dropped by the decoder. */
function parseJson(bytes: Buffer, decoder: TextDecoder): unknown {
  const text = decoder.decode(bytes);
  if (text.length === 0) return {};
  const first = text[/^[\x20\x09\x0a\x0d]*/.exec(text)![0].length];
  const invalid = () => invalidRequest('invalid_json', 'We could not parse the JSON body of your request.');
  if (first !== '{' && first !== '[') throw invalid();
  try {
    return JSON.parse(text);
  } catch {
    throw invalid();
  }
}

const tooLarge = () =>
  new ApiError({
    status: 413,
    type: 'invalid_request_error',
    code: 'request_too_large',
    message: `The request body exceeds the ${MAX_BODY_BYTES} byte limit.`,
  });

const unsupportedContent = (message: string) => new ApiError({ status: 415, type: 'invalid_request_error', code: 'unsupported_content_type', message });

const unreadable = () => invalidRequest('invalid_body', 'The request body could not be read.');
