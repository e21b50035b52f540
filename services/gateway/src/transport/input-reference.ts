import { InputReferenceParam, invalidRequest, VIDEO_REFERENCE_MAX_BYTES, type VideoReference, type VideoReferenceType } from '@oc/contracts';
import { UploadedFile } from './multipart';

const PARAM = 'input_reference';
const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** What an image's first bytes say it is: JPEG's start-of-image marker, PNG's signature, WebP's RIFF container. */
export function imageTypeOf(bytes: Buffer): VideoReferenceType | undefined {
  if (bytes.length >= 3 && bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff) return 'image/jpeg';
  if (bytes.subarray(0, 8).equals(PNG_SIGNATURE)) return 'image/png';
  if (bytes.length >= 12 && bytes.toString('latin1', 0, 4) === 'RIFF' && bytes.toString('latin1', 8, 12) === 'WEBP') return 'image/webp';
  return undefined;
}

const invalid = (message: string, param = PARAM) => invalidRequest('invalid_parameter', message, param);

/**
 * A create's `input_reference` taken out of its body, as OpenAI's SDKs send it: a file part of a form, or
 * `{image_url}` holding a data URL. Its type is what its bytes are, whatever the client called it. An https URL
 * is refused rather than fetched (a URL we fetch for a client is a way into our network, and what it serves
 * could change between our check and the provider's fetch); so is a `file_id`, there being no Files API here.
 */
export function takeInputReference(body: unknown): { body: unknown; reference?: VideoReference } {
  if (typeof body !== 'object' || body === null || !(PARAM in body)) return { body };
  const { [PARAM]: raw, ...rest } = body as Record<string, unknown>;
  const bytes = raw instanceof UploadedFile ? raw.bytes : bytesOf(raw);
  if (bytes.length === 0) throw invalid('The input_reference image is empty.');
  if (bytes.length > VIDEO_REFERENCE_MAX_BYTES) {
    throw invalid(
      `The input_reference image is ${Math.ceil(bytes.length / 1024)} KiB; at most ${VIDEO_REFERENCE_MAX_BYTES / 1024} KiB is taken (a JPEG or WebP of the video's size fits).`,
    );
  }
  const type = imageTypeOf(bytes);
  if (!type) throw invalid('input_reference must be a JPEG, PNG or WebP image.');
  return { body: rest, reference: { content_type: type, data: bytes.toString('base64') } };
}

function bytesOf(raw: unknown): Buffer {
  const parsed = InputReferenceParam.safeParse(raw);
  if (!parsed.success) throw invalid('input_reference must be an image file, or an object with image_url holding a data: URL of the image.');
  const { image_url: url, file_id: fileId } = parsed.data;
  if (fileId !== undefined) {
    throw invalidRequest(
      'unsupported_parameter',
      'input_reference.file_id is not supported here (there is no Files API): send the image itself, as a file part named input_reference or as a data: URL in input_reference.image_url.',
      `${PARAM}.file_id`,
    );
  }
  if (url === undefined) throw invalid('input_reference needs image_url (a data: URL of the image).', `${PARAM}.image_url`);
  if (!url.startsWith('data:')) {
    throw invalidRequest(
      'unsupported_parameter',
      'input_reference.image_url must be a data: URL of the image (data:image/png;base64,…); other URLs are not fetched. Or send the image as a file part named input_reference.',
      `${PARAM}.image_url`,
    );
  }
  const data = /^data:[^,;]*(;[^,;]*)*;base64,(.*)$/is.exec(url)?.[2]?.replace(/\s+/g, '');
  if (data === undefined || !BASE64.test(data)) throw invalid('input_reference.image_url must be a base64 data: URL (data:image/png;base64,…).', `${PARAM}.image_url`);
  return Buffer.from(data, 'base64');
}
