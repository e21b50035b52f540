import { createServer } from 'node:http';
import { createHmac, timingSafeEqual } from 'node:crypto';
const secret = process.env.WEBHOOK_SECRET, seen = new Set(); // keep seen ids in a database in production
createServer((req, res) => { const chunks = []; req.on('data', (c) => chunks.push(c)).on('end', () => {
  const body = Buffer.concat(chunks).toString(), parts = String(req.headers['x-service-signature']).split(',').map((p) => p.split('='));
  const t = Number(parts.find(([k]) => k === 't')?.[1]), expected = createHmac('sha256', secret).update(`${t}.${body}`).digest('hex');
  if (!(Math.abs(Date.now() / 1000 - t) <= 300 && parts.some(([k, v]) => k === 'v1' && v?.length === 64 && timingSafeEqual(Buffer.from(v), Buffer.from(expected))))) return res.writeHead(401).end();
  const event = JSON.parse(body); if (!seen.has(event.id)) { seen.add(event.id); console.log(event.type, event.data.id); }
  res.writeHead(204).end(); }); }).listen(process.env.PORT ?? 4242);
