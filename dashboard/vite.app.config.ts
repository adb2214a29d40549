// The page magic-sync-dashboard serves: the package mounted by a small app
// that fetches the reads from the server it came from.
import vue from '@vitejs/plugin-vue'
import { defineConfig } from 'vite'

export default defineConfig({
  plugins: [vue()],
  root: 'app',
  base: './',
  build: {
    outDir: '../dist/app',
    emptyOutDir: true,
  },
})
