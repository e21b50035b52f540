export * from './gateway';
export { cookieSecure, GatewayLimitsConfigSchema, RedisConfigSchema } from './config';
export { RateLimits, redisReady } from './application/rate-limits';
export { HttpServerConfigSchema, type HttpServerConfig } from './transport/http-server';
