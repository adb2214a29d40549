import '../page.css'
import { createApp } from 'vue'
import RegisterPage from './RegisterPage.vue'

createApp(RegisterPage).mount('#app')
