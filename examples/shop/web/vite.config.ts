// Two pages, built into dist/: the head office's (index.html) and a
// register's (register.html). The dashboard package is linked from the
// repository (file:../../../dashboard): Vue is taken once, from here.
import vue from '@vitejs/plugin-vue'
import { defineConfig } from 'vite'

export default defineConfig({
  plugins: [vue()],
  base: './',
  resolve: { dedupe: ['vue'] },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    rollupOptions: {
      input: { index: 'index.html', register: 'register.html' },
    },
  },
})
