import { readFile } from 'node:fs/promises';
import { DeleteObjectCommand, GetObjectCommand, HeadObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import type { FileStore, UrlSigner } from '../application/ports';

export interface S3Options {
  bucket: string;
  /** For S3-compatible stores (MinIO); unset for AWS. */
  endpoint?: string | undefined;
  region: string;
  /** Unset: the SDK's default credential chain. */
  credentials?: { accessKeyId: string; secretAccessKey: string } | undefined;
  /** MinIO and most compatibles address buckets by path, not by host. */
  forcePathStyle: boolean;
}

const isNotFound = (error: unknown) =>
  (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode === 404;

/** Permanent object storage on S3 or a compatible store; keys are the same relative paths as on disk. */
export class S3FileStore implements FileStore, UrlSigner {
  private readonly s3: S3Client;

  constructor(private readonly options: S3Options) {
    this.s3 = new S3Client({
      region: options.region,
      forcePathStyle: options.forcePathStyle,
      ...(options.endpoint ? { endpoint: options.endpoint } : {}),
      ...(options.credentials ? { credentials: options.credentials } : {}),
      // Plain bodies with a Content-Length: what every S3-compatible store understands.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    });
  }

  async put(key: string, bytes: Buffer): Promise<void> {
    await this.s3.send(new PutObjectCommand({ Bucket: this.options.bucket, Key: key, Body: bytes, ContentLength: bytes.length }));
  }

  async putFile(key: string, path: string): Promise<void> {
    await this.put(key, await readFile(path));
  }

  async size(key: string): Promise<number | null> {
    try {
      const head = await this.s3.send(new HeadObjectCommand({ Bucket: this.options.bucket, Key: key }));
      return head.ContentLength ?? 0;
    } catch (error) {
      if (isNotFound(error)) return null;
      throw error;
    }
  }

  async read(key: string, offset: number, length: number): Promise<Buffer> {
    const object = await this.s3.send(
      new GetObjectCommand({ Bucket: this.options.bucket, Key: key, Range: `bytes=${offset}-${offset + length - 1}` }),
    );
    return Buffer.from(await object.Body!.transformToByteArray());
  }

  async remove(key: string): Promise<void> {
    await this.s3.send(new DeleteObjectCommand({ Bucket: this.options.bucket, Key: key }));
  }

  /**
   * A presigned GET of the object (SigV4 in the query string), computed here without a request: anyone with
   * the URL may download the object until `expiresInSeconds` after `nowMs`, and no longer.
   */
  signedUrl(key: string, expiresInSeconds: number, nowMs: number): Promise<string> {
    return getSignedUrl(this.s3, new GetObjectCommand({ Bucket: this.options.bucket, Key: key }), {
      expiresIn: expiresInSeconds,
      signingDate: new Date(nowMs),
    });
  }

  close(): void {
    this.s3.destroy();
  }
}
