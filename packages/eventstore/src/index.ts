export * from './port';
export * from './decider';
