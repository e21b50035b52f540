/** Target A: bare `node:http` answering a fixed small JSON body, the floor any Node server starts from. */
import { createServer } from 'node:http';
import { announce, HEALTH_BODY } from './announce';

const body = Buffer.from(HEALTH_BODY);
announce(
  createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length });
    res.end(body);
  }),
);
