import { createApp } from 'vue'
import '../src/styles.css'
import App from './App.vue'

createApp(App).mount('#app')
