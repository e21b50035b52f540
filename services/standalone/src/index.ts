export * from './standalone';
export * from './config';
