export * from './provider-error';
export * from './breaker';
export * from './pool';
export * from './catalog';
