import { onScopeDispose, ref, shallowRef, watch, type MaybeRefOrGetter, type Ref, toValue } from 'vue'
import { clockOf, type ServerClock } from '../core/time'

/** The page's monotonic clock: ages are moved on by it, never by the wall clock. */
const pageNow = () => (typeof performance !== 'undefined' ? performance.now() : 0)

/**
 * The server's clock as the latest answer set it, and the page's time,
 * ticking every `every` ms so that "5 minutes ago" moves on between reads.
 */
export function useServerClock(
  answer: MaybeRefOrGetter<{ now: string } | null | undefined>,
  every = 1000,
): { clock: Ref<ServerClock | null>; page: Ref<number> } {
  const clock = shallowRef<ServerClock | null>(null)
  const page = ref(pageNow())
  watch(
    () => toValue(answer),
    (a) => {
      page.value = pageNow()
      clock.value = clockOf(a, page.value)
    },
    { immediate: true },
  )
  const timer = setInterval(() => (page.value = pageNow()), every)
  onScopeDispose(() => clearInterval(timer))
  return { clock, page }
}
