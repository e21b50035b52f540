/** Target B: bare Express 5 answering the same body; ours' gateway is an Express app, so this is its floor. */
import { createServer } from 'node:http';
import express from 'express';
import { announce, HEALTH_BODY } from './announce';

const body = JSON.parse(HEALTH_BODY) as unknown;
const app = express();
app.disable('x-powered-by');
app.use((_req, res) => {
  res.json(body);
});
announce(createServer(app));
