import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalFileStore } from '../src/adapters/local-file-store';
import { S3FileStore } from '../src/adapters/s3-file-store';
import type { FileStore } from '../src/application/ports';
import { startFakeS3 } from './fake-s3';

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
