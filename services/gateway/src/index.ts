export * from './gateway';
export { RateLimits } from './application/rate-limits';
export { HttpServerConfigSchema, type HttpServerConfig } from './transport/http-server';
