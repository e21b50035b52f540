import { createHash, createHmac } from 'node:crypto';

const sha256 = (data: string) => createHash('sha256').update(data).digest('hex');
const hmac = (key: string | Buffer, data: string) => createHmac('sha256', key).update(data).digest();
/** RFC 3986 encoding, as SigV4 wants it. */
const encode = (s: string) => encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);

/**
 * The signature a presigned S3 GET (query-string SigV4, host the only signed header, UNSIGNED-PAYLOAD) should
 * carry, computed from AWS's published algorithm independently of the SDK: the test checks it against AWS's
 * own worked example before trusting it with the SDK's URLs.
 */
export function expectedPresignedSignature(url: string, secretAccessKey: string, region: string): string {
  const u = new URL(url);
  const date = u.searchParams.get('X-Amz-Date')!;
  const query = [...u.searchParams]
    .filter(([name]) => name !== 'X-Amz-Signature')
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([name, value]) => `${encode(name)}=${encode(value)}`)
    .join('&');
  const canonicalRequest = ['GET', u.pathname, query, `host:${u.host}\n`, 'host', 'UNSIGNED-PAYLOAD'].join('\n');
  const scope = `${date.slice(0, 8)}/${region}/s3/aws4_request`;
  const stringToSign = ['AWS4-HMAC-SHA256', date, scope, sha256(canonicalRequest)].join('\n');
  let key = hmac(`AWS4${secretAccessKey}`, date.slice(0, 8));
  for (const part of [region, 's3', 'aws4_request']) key = hmac(key, part);
  return createHmac('sha256', key).update(stringToSign).digest('hex');
}
