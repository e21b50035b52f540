import pkg from '../package.json' with { type: 'json' };

/** The release reported by GET /v1/health. */
export const version: string = pkg.version;
