/** How C (targets/upstream.ts) shapes a reply; here, apart from the server, so the report can say it too. */
export const TOKENS_PER_CHUNK = 10;
