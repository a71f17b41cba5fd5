// Builds the studio into the Python package (src/preflab/studio/static), which the FastAPI app
// serves; the built bundle is committed so that the studio works where node is absent.
import { fileURLToPath } from "node:url";
import { defineConfig } from "vite";

const outDir = fileURLToPath(new URL("../../src/preflab/studio/static", import.meta.url));

export default defineConfig({
  base: "/",
  build: {
    outDir,
    emptyOutDir: true,
    assetsDir: "assets",
    // No data: URLs for assets and no inline code: the app's CSP is script-src 'self'; style-src 'self'.
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    sourcemap: false,
    target: "es2022",
  },
  server: {
    proxy: { "/api": "http://127.0.0.1:8765", "/media": "http://127.0.0.1:8765" },
  },
});
