// The bundle goes where the gateway serves it (gateway/static), deterministic and small:
// no source maps, content-hashed file names, relative URLs (a proxy may serve the page
// under a path prefix).
import { defineConfig } from 'vite';

// `npm run dev`: the page with hot reload; the API of a running `make run`.
const gateway = process.env.PERDURE_URL ?? 'http://127.0.0.1:8000';

export default defineConfig({
  base: './',
  build: {
    outDir: '../gateway/static',
    emptyOutDir: true,
    sourcemap: false,
    target: 'es2022',
    // Everything in files of its own: the page's CSP refuses inline data.
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    rollupOptions: {
      // Notes on third-party code ("use client", comment placement) that change nothing here.
      onwarn(warning, warn) {
        if (!['MODULE_LEVEL_DIRECTIVE', 'INVALID_ANNOTATION'].includes(warning.code)) warn(warning);
      },
    },
  },
  server: {
    proxy: { '/api': gateway, '/v1': gateway },
  },
});
