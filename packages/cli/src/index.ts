export { run, type Io } from './run';
