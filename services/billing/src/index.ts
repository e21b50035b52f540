export * from './app';
export * from './application/billing';
export * from './config';
