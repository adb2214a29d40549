import 'magic_sync_dashboard/styles.css'
import '../page.css'
import { createApp } from 'vue'
import HeadOffice from './HeadOffice.vue'

createApp(HeadOffice).mount('#app')
