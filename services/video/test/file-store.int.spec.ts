import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalFileStore } from '../src/adapters/local-file-store';
import { S3FileStore } from '../src/adapters/s3-file-store';
import type { FileStore } from '../src/application/ports';
import { startFakeS3 } from './fake-s3';
import { expectedPresignedSignature } from './sigv4';

let dir: string;
let fakeS3: Awaited<ReturnType<typeof startFakeS3>>;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'oc-files-'));
  fakeS3 = await startFakeS3();
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
  await fakeS3.close();
});

const s3 = (options: { endpoint: string; bucket: string; accessKeyId?: string; secretAccessKey?: string }) =>
  new S3FileStore({
    bucket: options.bucket,
    endpoint: options.endpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: options.accessKeyId ?? 'test', secretAccessKey: options.secretAccessKey ?? 'test-secret' },
    forcePathStyle: true,
  });

/** Every FileStore adapter passes the same contract; a real S3-compatible store joins when VIDEO_S3_TEST_* is set. */
const adapters: [string, () => FileStore][] = [
  ['local directory', () => new LocalFileStore(dir)],
  ['S3 (local fake)', () => s3({ endpoint: fakeS3.url, bucket: 'videos' })],
  ...(process.env.VIDEO_S3_TEST_ENDPOINT
    ? [
        [
          'S3 (configured)',
          () =>
            s3({
              endpoint: process.env.VIDEO_S3_TEST_ENDPOINT!,
              bucket: process.env.VIDEO_S3_TEST_BUCKET ?? 'oc-test',
              accessKeyId: process.env.VIDEO_S3_TEST_ACCESS_KEY_ID!,
              secretAccessKey: process.env.VIDEO_S3_TEST_SECRET_ACCESS_KEY!,
            }),
        ] as [string, () => FileStore],
      ]
    : []),
];

describe.each(adapters)('file store: %s', (_, make) => {
  const bytes = Buffer.from(Array.from({ length: 1000 }, (_, i) => i % 251));

  it('stores a file, reports its size, reads any slice, and removes it', async () => {
    const store = make();
    const key = `org_1/video_${Math.random().toString(36).slice(2)}.mp4`;
    expect(await store.size(key)).toBeNull();
    await store.put(key, bytes);
    expect(await store.size(key)).toBe(1000);
    expect(await store.read(key, 0, 1000)).toEqual(bytes);
    expect(await store.read(key, 990, 10)).toEqual(bytes.subarray(990));
    expect(await store.read(key, 100, 50)).toEqual(bytes.subarray(100, 150));
    await store.remove(key);
    expect(await store.size(key)).toBeNull();
    await store.remove(key);
  });

  it('stores a local file by path, again over an existing one, and removing it never touches the source', async () => {
    const store = make();
    const source = join(dir, `source-${Math.random().toString(36).slice(2)}.mp4`);
    await writeFile(source, bytes);
    const key = `org_2/video_${Math.random().toString(36).slice(2)}.mp4`;
    await store.putFile(key, source);
    expect(await store.read(key, 0, 1000)).toEqual(bytes);
    await store.putFile(key, source);
    expect(await store.size(key)).toBe(1000);
    await store.put(key, Buffer.from('replaced'));
    expect(await store.read(key, 0, 100)).toEqual(Buffer.from('replaced'));
    await store.remove(key);
    expect(await readFile(source)).toEqual(bytes);
  });
});

describe('presigned URLs of the S3 store (offline: signing makes no request)', () => {
  it('the independent SigV4 check reproduces the worked example of AWS\'s documentation', () => {
    // "Authenticating Requests: Using Query Parameters (AWS Signature Version 4)", Amazon S3 API Reference.
    const example =
      'https://examplebucket.s3.amazonaws.com/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256' +
      '&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z' +
      '&X-Amz-Expires=86400&X-Amz-SignedHeaders=host';
    expect(expectedPresignedSignature(example, 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY', 'us-east-1')).toBe(
      'aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404',
    );
  });

  it('signs a GET of the object for the lifetime asked, from the time given, that S3 would accept and that fetches it', async () => {
    const store = s3({ endpoint: fakeS3.url, bucket: 'videos', accessKeyId: 'AKIDTEST', secretAccessKey: 'test-secret' });
    const key = 'org_1/video_signed.mp4';
    await store.put(key, Buffer.from('the movie'));
    const now = Date.UTC(2026, 10, 22, 12, 30, 5);
    const url = new URL(await store.signedUrl(key, 600, now));
    expect(`${url.origin}${url.pathname}`).toBe(`${fakeS3.url}/videos/org_1/video_signed.mp4`);
    expect(Object.fromEntries(url.searchParams)).toMatchObject({
      'X-Amz-Algorithm': 'AWS4-HMAC-SHA256',
      'X-Amz-Credential': 'AKIDTEST/20261122/us-east-1/s3/aws4_request',
      'X-Amz-Date': '20261122T123005Z',
      'X-Amz-Expires': '600',
      'X-Amz-SignedHeaders': 'host',
    });
    expect(url.searchParams.get('X-Amz-Signature')).toBe(expectedPresignedSignature(url.href, 'test-secret', 'us-east-1'));
    expect(url.searchParams.get('X-Amz-Signature')).not.toBe(expectedPresignedSignature(url.href, 'another-secret', 'us-east-1'));
    // Signed again later: a new date, hence a new signature.
    const later = new URL(await store.signedUrl(key, 600, now + 60_000));
    expect(later.searchParams.get('X-Amz-Date')).toBe('20261122T123105Z');
    expect(later.searchParams.get('X-Amz-Signature')).not.toBe(url.searchParams.get('X-Amz-Signature'));
    const res = await fetch(url);
    expect(Buffer.from(await res.arrayBuffer()).toString()).toBe('the movie');
    store.close();
  });
});
