import type { IncomingHttpHeaders } from 'node:http';
import { type ApiError, invalidRequest } from '@oc/contracts';
import busboy from 'busboy';

/** A file part of a form, read whole: what it is is for the route to check, never taken from the client's word. */
export class UploadedFile {
  constructor(
    readonly bytes: Buffer,
    /** The part's own Content-Type, as the client declared it. */
    readonly declaredType: string,
  ) {}
}

export type FormValue = string | UploadedFile | Record<string, string>;

/**
 * A multipart/form-data body (what OpenAI's SDKs send for forms), read whole under the same cap as a JSON body,
 * as an object. A field named `name[key]`, as the SDKs write an object's members, becomes `{name: {key}}`. File parts
 * are taken only under the names the route lists; any other is refused, naming it.
 */
export function readMultipartBody(body: Buffer, headers: IncomingHttpHeaders, files: readonly string[]): Promise<Record<string, FormValue>> {
  return new Promise((resolve, reject) => {
    let parser: busboy.Busboy;
    try {
      parser = busboy({ headers, limits: { fields: 100 } });
    } catch {
      reject(invalidRequest('invalid_body', 'The multipart body could not be read (missing boundary?).'));
      return;
    }
    const fields: Record<string, FormValue> = {};
    let pending = 0;
    let closed = false;
    let failed = false;
    const fail = (error: ApiError) => {
      failed = true;
      reject(error);
    };
    const settle = () => {
      if (closed && pending === 0 && !failed) resolve(fields);
    };
    parser.on('field', (name, value) => {
      const member = /^([^[\]]+)\[([^[\]]+)\]$/.exec(name);
      if (!member) {
        fields[name] = value;
        return;
      }
      const [, outer, inner] = member as unknown as [string, string, string];
      const object = fields[outer];
      if (typeof object === 'string' || object instanceof UploadedFile) return fail(invalidRequest('invalid_parameter', `'${outer}' was sent twice.`, outer));
      fields[outer] = { ...object, [inner]: value };
    });
    parser.on('file', (name, stream, info) => {
      if (!files.includes(name)) {
        stream.resume();
        return fail(invalidRequest('unsupported_parameter', `File uploads are not supported ('${name}').`, name));
      }
      if (name in fields) {
        stream.resume();
        return fail(invalidRequest('invalid_parameter', `'${name}' was sent twice.`, name));
      }
      pending++;
      // Named at once, so that a second part of the same name is refused while this one is still being read.
      fields[name] = new UploadedFile(Buffer.alloc(0), info.mimeType);
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('close', () => {
        pending--;
        fields[name] = new UploadedFile(Buffer.concat(chunks), info.mimeType);
        settle();
      });
    });
    parser.on('fieldsLimit', () => fail(invalidRequest('invalid_body', 'Too many form fields.')));
    parser.on('error', () => fail(invalidRequest('invalid_body', 'The multipart body could not be read.')));
    parser.on('close', () => {
      closed = true;
      settle();
    });
    parser.end(body);
  });
}
