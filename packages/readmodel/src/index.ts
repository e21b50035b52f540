export * from './port';
export * from './query';
export * from './sqlite';
export * from './mongodb';
export * from './projection';
export * from './pagination';
export * from './projection-thread';
export * from './shared';
