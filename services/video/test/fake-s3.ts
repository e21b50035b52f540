import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * Just enough of S3's path-style object API (PUT, HEAD, GET with one Range, DELETE) for the FileStore
 * contract to run without a MinIO. Signatures are not checked.
 */
export async function startFakeS3() {
  const objects = new Map<string, Buffer>();
  const server = createServer((req, res) => {
    const key = decodeURIComponent(new URL(req.url ?? '/', 'http://s3').pathname);
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = objects.get(key);
      switch (req.method) {
        case 'PUT':
          objects.set(key, Buffer.concat(chunks));
          res.writeHead(200, { etag: '"fake"' }).end();
          return;
        case 'DELETE':
          objects.delete(key);
          res.writeHead(204).end();
          return;
        case 'HEAD':
          if (!body) return void res.writeHead(404).end();
          res.writeHead(200, { 'content-length': String(body.length) }).end();
          return;
        case 'GET': {
          if (!body) {
            res.writeHead(404, { 'content-type': 'application/xml' });
            return void res.end('<?xml version="1.0"?><Error><Code>NoSuchKey</Code><Message>missing</Message></Error>');
          }
          const m = /^bytes=(\d+)-(\d+)$/.exec(req.headers.range ?? '');
          const start = m ? Number(m[1]) : 0;
          const end = m ? Math.min(Number(m[2]), body.length - 1) : body.length - 1;
          const slice = body.subarray(start, end + 1);
          res.writeHead(m ? 206 : 200, { 'content-length': String(slice.length) }).end(slice);
          return;
        }
        default:
          res.writeHead(405).end();
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    objects,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
