import type { ImagePart } from '@oc/contracts';

/**
 * Image input tokens as OpenAI documents them for its tile-based vision models (platform.openai.com/docs/guides/
 * images-vision, "Calculating costs"): `low` detail is 85 tokens whatever the size; `high` (and `auto`) scales the
 * image to fit within 2048 x 2048, then its shortest side down to 768, and costs 170 per 512-pixel tile plus 85.
 */
const BASE_TOKENS = 85;
const TILE_TOKENS = 170;
const TILE = 512;
const FIT = 2048;
const SHORT_SIDE = 768;

/**
 * The most a high-detail image can cost by that method: at most 2 x 4 tiles remain after the two scalings (a
 * shortest side of 768 or less and a longest of 2048 or less), 85 + 8 x 170. An https image's size is not known
 * before the provider fetches it, so it is counted at this bound: what is reserved then covers any image.
 */
export const MAX_IMAGE_TOKENS = BASE_TOKENS + 8 * TILE_TOKENS;

export function tileTokens(width: number, height: number): number {
  let w = width;
  let h = height;
  if (w > FIT || h > FIT) {
    const ratio = Math.min(FIT / w, FIT / h);
    w = Math.floor(w * ratio);
    h = Math.floor(h * ratio);
  }
  if (Math.min(w, h) > SHORT_SIDE) {
    const ratio = SHORT_SIDE / Math.min(w, h);
    w = Math.floor(w * ratio);
    h = Math.floor(h * ratio);
  }
  return BASE_TOKENS + TILE_TOKENS * Math.ceil(w / TILE) * Math.ceil(h / TILE);
}

/** An image part's tokens: by its size when it is a data URL whose header says it, else at the bound. */
export function imageTokens(part: ImagePart): number {
  if (part.image_url.detail === 'low') return BASE_TOKENS;
  const size = dataUrlSize(part.image_url.url);
  return size ? tileTokens(size.width, size.height) : MAX_IMAGE_TOKENS;
}

/** A JPEG's frame header can follow large metadata; this much of the image is read for it at most. */
const HEADER_BYTES = 192 * 1024;

/** Width and height from a PNG, GIF, WebP or JPEG data URL's header; undefined when it cannot be read. */
export function dataUrlSize(url: string): { width: number; height: number } | undefined {
  const comma = url.indexOf(',');
  if (!url.startsWith('data:image/') || comma < 0) return undefined;
  // Base64 decodes in groups of 4 characters: a prefix of a multiple of 4 decodes to a prefix of the bytes.
  const bytes = Buffer.from(url.slice(comma + 1, comma + 1 + (HEADER_BYTES / 3) * 4), 'base64');
  const size = pngSize(bytes) ?? gifSize(bytes) ?? webpSize(bytes) ?? jpegSize(bytes);
  return size && size.width > 0 && size.height > 0 ? size : undefined;
}

function pngSize(b: Buffer) {
  if (b.length < 24 || b.readUInt32BE(0) !== 0x89504e47) return undefined;
  return { width: b.readUInt32BE(16), height: b.readUInt32BE(20) };
}

function gifSize(b: Buffer) {
  if (b.length < 10 || b.toString('latin1', 0, 3) !== 'GIF') return undefined;
  return { width: b.readUInt16LE(6), height: b.readUInt16LE(8) };
}

function webpSize(b: Buffer) {
  if (b.length < 30 || b.toString('latin1', 0, 4) !== 'RIFF' || b.toString('latin1', 8, 12) !== 'WEBP') return undefined;
  const chunk = b.toString('latin1', 12, 16);
  if (chunk === 'VP8 ') return { width: b.readUInt16LE(26) & 0x3fff, height: b.readUInt16LE(28) & 0x3fff };
  if (chunk === 'VP8L') {
    const bits = b.readUInt32LE(21);
    return { width: (bits & 0x3fff) + 1, height: ((bits >> 14) & 0x3fff) + 1 };
  }
  if (chunk === 'VP8X') return { width: b.readUIntLE(24, 3) + 1, height: b.readUIntLE(27, 3) + 1 };
  return undefined;
}

function jpegSize(b: Buffer) {
  if (b.length < 4 || b[0] !== 0xff || b[1] !== 0xd8) return undefined;
  let i = 2;
  while (i + 9 < b.length) {
    if (b[i] !== 0xff) return undefined;
    const marker = b[i + 1]!;
    // Start-of-frame markers (baseline, progressive …), not DHT (C4), JPG (C8) or DAC (CC).
    if (marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc) {
      return { width: b.readUInt16BE(i + 7), height: b.readUInt16BE(i + 5) };
    }
    i += 2 + b.readUInt16BE(i + 2);
  }
  return undefined;
}
