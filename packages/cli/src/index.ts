export { run } from './run';
export type { Io } from './command';
