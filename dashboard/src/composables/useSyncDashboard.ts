// The dashboard as plain reactive data: what SyncDashboard draws, for a host
// that draws it with its own parts. It fetches nothing: the host passes the
// answers it fetched, as refs or getters.
import { computed, type MaybeRefOrGetter, toValue } from 'vue'
import { readAnswer } from '../core/contract/read'
import { CONTRACT, type Listing, type Overview, type Progress, type ReplicaState } from '../core/contract/types'
import {
  bannerOf,
  problemsLeftOut,
  problemsOf,
  progressOf,
  replicaPage,
  stateLabel,
  statesOf,
  tableLines,
  toneOf,
  type Context,
} from '../core/view'
import { useServerClock } from './clock'
import { useWords } from './locale'

export interface DashboardAnswers {
  overview: MaybeRefOrGetter<unknown>
  listing?: MaybeRefOrGetter<unknown>
  progress?: MaybeRefOrGetter<unknown>
}

export interface DashboardOptions {
  names?: MaybeRefOrGetter<Record<string, string> | undefined>
  labels?: MaybeRefOrGetter<Record<string, string> | undefined>
  locale?: MaybeRefOrGetter<string | null | undefined>
  /** How long (ms) a replica may be silent before it is "not answering"; 15 minutes unless said. */
  silentAfter?: MaybeRefOrGetter<number | undefined>
  pageSize?: MaybeRefOrGetter<number | undefined>
}

export const FIFTEEN_MINUTES = 15 * 60 * 1000

export function useSyncDashboard(answers: DashboardAnswers, options: DashboardOptions = {}) {
  const words = useWords(options.locale)
  const read = <T extends { contract: number }>(value: unknown) => (value == null ? null : readAnswer<T>(value))
  const overviewRead = computed(() => read<Overview>(toValue(answers.overview)))
  const listingRead = computed(() => read<Listing>(toValue(answers.listing)))
  const progressRead = computed(() => read<Progress>(toValue(answers.progress)))
  const overview = computed(() => (overviewRead.value?.ok ? overviewRead.value.answer : null))
  const listing = computed(() => (listingRead.value?.ok ? listingRead.value.answer : null))
  const progress = computed(() => (progressRead.value?.ok ? progressRead.value.answer : null))
  const { clock, page } = useServerClock(overview)

  /** Why an answer is not drawn, if one is not: its contract is not the one this package reads. */
  const refused = computed(() => {
    for (const r of [overviewRead.value, listingRead.value, progressRead.value]) {
      if (r && !r.ok) {
        return r.reason === 'contract' ? words.value.contractRefused(r.got, CONTRACT) : words.value.notAnAnswer()
      }
    }
    return null
  })

  const context = computed<Context>(() => ({
    words: words.value,
    names: toValue(options.names),
    labels: toValue(options.labels),
    clock: clock.value,
    page: page.value,
    silentAfter: toValue(options.silentAfter) ?? FIFTEEN_MINUTES,
  }))

  const banner = computed(() => (overview.value ? bannerOf(overview.value, context.value) : null))
  const states = computed(() => {
    const o = overview.value
    if (!o) return []
    return statesOf(o).map((state) => ({
      state: state as ReplicaState,
      label: stateLabel(state, words.value),
      count: (o.states as unknown as Record<string, number>)[state] ?? 0,
      tone: toneOf(state),
    }))
  })
  const replicas = computed(() =>
    overview.value ? replicaPage(overview.value, listing.value, toValue(options.pageSize) ?? 20, context.value) : null,
  )
  const tables = computed(() => (overview.value ? tableLines(overview.value.tables, context.value) : []))
  const problems = computed(() => (overview.value ? problemsOf(overview.value.health, context.value) : []))
  const moreProblems = computed(() => {
    const n = overview.value ? problemsLeftOut(overview.value.health) : 0
    return n > 0 ? words.value.more(n) : null
  })
  const replicaProgress = computed(() => (progress.value ? progressOf(progress.value, context.value) : []))

  return { words, refused, banner, states, replicas, tables, problems, moreProblems, progress: replicaProgress, context }
}
