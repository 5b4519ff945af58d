import { defineConfig } from 'vitest/config';
import { svelte } from '@sveltejs/vite-plugin-svelte';

export default defineConfig({
  plugins: [svelte()],
  clearScreen: false,
  server: {
    port: 5173,
    strictPort: true,
    // Browser-mode development against `leadline serve`.
    proxy: { '/api': 'http://127.0.0.1:8787' },
  },
  build: { target: 'es2022', chunkSizeWarningLimit: 800 },
  test: { include: ['src/**/*.test.ts'] },
});
