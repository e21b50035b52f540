export * from './gateway';
export { RateLimits } from './application/rate-limits';
