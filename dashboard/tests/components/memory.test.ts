// An hour of refreshes must not grow the page: the components keep the
// answers they are given now and let go of every one before, and leave no
// timer behind once gone. (The benchmark, bench/page.mjs, measures the same
// in Chromium: the page's objects stay flat over 1,000 refreshes.)
import { mount } from '@vue/test-utils'
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { effectScope, nextTick, ref } from 'vue'
import { createI18n } from 'vue-i18n'
import { SyncDashboard, WishList, useSyncDashboard, type Overview } from '../../src'
import { answers, unmasked } from '../answers'

setFlagsFromString('--expose-gc')
const gc = runInNewContext('gc') as () => void

/** The answers still alive of those `refs` point at, after collections. */
async function alive(refs: WeakRef<object>[]): Promise<number> {
  // A WeakRef keeps its target until the task that made it ends.
  await new Promise((resolve) => setTimeout(resolve, 0))
  for (let i = 0; i < 3; i++) {
    gc()
    await new Promise((resolve) => setTimeout(resolve, 0))
  }
  return refs.filter((r) => r.deref() !== undefined).length
}

/** The n-th refresh's answer: a new object, its clock moved on, as each read gives. */
function overviewAt(n: number): Overview {
  const at = new Date(Date.parse('2026-12-01T10:00:00.000Z') + n * 3000).toISOString()
  return unmasked(answers['overview-every-problem'] as Overview, at)
}

const REFRESHES = 300

describe('over many refreshes', () => {
  afterEach(() => {
    vi.useRealTimers()
  })

  it('SyncDashboard keeps the last answers it was given and none before', async () => {
    const w = mount(SyncDashboard, {
      props: { overview: overviewAt(0), locale: 'es' },
      global: { plugins: [createI18n({ legacy: false, locale: 'es', messages: {} })] },
    })
    const given: WeakRef<object>[] = []
    for (let n = 1; n <= REFRESHES; n++) {
      const o = overviewAt(n)
      given.push(new WeakRef(o))
      await w.setProps({ overview: o })
    }
    expect(w.get('.msd-banner').attributes('data-tone')).toBe('fix')
    // The last, drawn now; a watcher's old value may hold the one before.
    expect(await alive(given)).toBeLessThanOrEqual(2)
    w.unmount()
  })

  it('WishList keeps the last wishes it was given and none before', async () => {
    const w = mount(WishList, { props: { wishes: unmasked(answers['wishes-every-state']) } })
    const given: WeakRef<object>[] = []
    for (let n = 1; n <= REFRESHES; n++) {
      const wishes = unmasked(answers['wishes-every-state'], new Date(Date.parse('2026-12-01T10:00:00Z') + n * 3000).toISOString())
      given.push(new WeakRef(wishes as object))
      await w.setProps({ wishes })
    }
    expect(w.findAll('.msd-wish').length).toBeGreaterThan(0)
    expect(await alive(given)).toBeLessThanOrEqual(2)
    w.unmount()
  })

  it('useSyncDashboard keeps none of the answers a host passed before', async () => {
    const overview = ref<unknown>(overviewAt(0))
    const scope = effectScope()
    const d = scope.run(() => useSyncDashboard({ overview }))!
    const given: WeakRef<object>[] = []
    for (let n = 1; n <= REFRESHES; n++) {
      const o = overviewAt(n)
      given.push(new WeakRef(o))
      overview.value = o
      // What a host reads of it each refresh.
      expect(d.replicas.value?.lines.length).toBeGreaterThan(0)
      expect(d.problems.value.length).toBeGreaterThan(0)
      await nextTick()
    }
    expect(await alive(given)).toBeLessThanOrEqual(2)
    scope.stop()
  })

  it('leaves no timer behind once unmounted (the clock that moves ages on stops)', () => {
    vi.useFakeTimers()
    const w = mount(SyncDashboard, { props: { overview: overviewAt(0) } })
    expect(vi.getTimerCount()).toBeGreaterThan(0)
    w.unmount()
    expect(vi.getTimerCount()).toBe(0)
  })
})
