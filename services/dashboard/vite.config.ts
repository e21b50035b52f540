import react from '@vitejs/plugin-react';
import { defineConfig } from 'vite';

/** The console is served by the gateway at /dashboard/, as static files built here into dist/. */
export default defineConfig({
  base: '/dashboard/',
  plugins: [react()],
  build: { outDir: 'dist', emptyOutDir: true, chunkSizeWarningLimit: 1024 },
  // `pnpm dev` in this package: the gateway (pnpm start) answers the API.
  server: { proxy: { '/console': 'http://127.0.0.1:8080' } },
});
