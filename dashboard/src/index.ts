// magic_sync_dashboard: the components, the composable, and everything of
// ./core (the answers' types, plain data and sentences). The stylesheet is
// built to magic_sync_dashboard/styles.css, for the host to import once.
import './styles.css'
export { default as SyncDashboard } from './components/SyncDashboard.vue'
export { default as RowPlaces } from './components/RowPlaces.vue'
export { default as WishList } from './components/WishList.vue'
export { useSyncDashboard, type DashboardAnswers, type DashboardOptions } from './composables/useSyncDashboard'
export * from './core/index'
