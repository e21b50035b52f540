export * from './port';
export * from './decider';
export * from './sqlite';
export * from './kurrentdb';
