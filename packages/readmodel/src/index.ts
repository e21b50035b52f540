export * from './port';
export * from './memory';
export * from './mongodb';
export * from './projection';
export * from './pagination';
