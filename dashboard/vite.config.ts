import { defineConfig } from "vite";

// The node serves dist/ at its root (dashboard_dir); relative asset URLs keep the page
// working behind a reverse proxy under a sub-path too.
export default defineConfig({
  base: "./",
  build: { outDir: "dist", emptyOutDir: true, sourcemap: false },
});
