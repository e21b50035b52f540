import { defineConfig } from 'tsup';
import { runnable } from '../../tsup.shared';

export default defineConfig(runnable({ main: 'src/main.ts', 'gateway-thread': 'src/gateway-thread.ts', 'projection-thread': 'src/projection-thread.ts' }));
