import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

/**
 * How long and how much a closing connection keeps reading what its client still sends: nginx's
 * `lingering_time` (30 s) and `lingering_timeout` (5 s), and a cap on the bytes dropped.
 */
export const LINGERING = { maxMs: 30_000, idleMs: 5_000, maxBytes: 64 * 1024 * 1024 };

const closing = new WeakSet<Socket>();

/** A connection that answered with `Connection: close` serves no further request, whatever its client sends. */
export const isClosing = (socket: Socket) => closing.has(socket);

/**
 * Answers `req` on a connection that then closes, without reading its body into anything. Closed at once, the
 * connection would be reset under a client still sending (Python's urllib writes its whole body before it reads
 * the answer): it gets a broken pipe, and the reset may discard the answer unread. So, as nginx's lingering
 * close does, the server ends its side once the answer is written, reads and drops what the client still sends,
 * and closes when the body is all in, or after `maxBytes`, `maxMs`, or `idleMs` without a byte.
 */
export function closeLingering(req: IncomingMessage, res: ServerResponse, limits = LINGERING): void {
  res.setHeader('Connection', 'close');
  const socket = req.socket;
  closing.add(socket);
  let dropped = 0;
  req.on('data', (chunk: Buffer) => {
    dropped += chunk.length;
    if (dropped > limits.maxBytes) socket.destroy();
  });
  // Node closes the socket of a `Connection: close` answer with destroySoon(): it ends our side, then destroys
  // the socket as soon as the answer is written, bytes of the client's still unread.
  socket.destroySoon = () => {
    socket.end();
    const deadline = setTimeout(() => socket.destroy(), limits.maxMs).unref();
    socket.once('close', () => clearTimeout(deadline));
    socket.setTimeout(limits.idleMs, () => socket.destroy());
    const closeOnceWritten = () => (socket.writableFinished ? socket.destroy() : socket.once('finish', () => socket.destroy()));
    if (req.complete) closeOnceWritten();
    else req.once('end', closeOnceWritten);
  };
}
