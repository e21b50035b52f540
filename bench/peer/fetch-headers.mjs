// Preloaded into each Portkey process by the bench. Portkey 1.15.2 on Node adds its x-portkey-* headers to the
// upstream's own Response when it relays a stream unchanged, and Node's fetch makes a response's headers
// immutable, so every streamed completion through it failed with 500 (Portkey-AI/gateway#1550 and #1389).
// Each answer of fetch is handed on as a Response of its own (the same body stream, not copied), as the fix
// proposed upstream does, so that the peer can be measured on streams at all.
const upstreamFetch = globalThis.fetch;
globalThis.fetch = async (...args) => {
  const res = await upstreamFetch(...args);
  return new Response(res.body, { status: res.status, statusText: res.statusText, headers: res.headers });
};
