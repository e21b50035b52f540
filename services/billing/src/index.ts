export * from './app';
export * from './application/billing';
