// The components over every answer the engine gave (the golden files and
// the fixtures): what a person reads.
import { flushPromises, mount } from '@vue/test-utils'
import { describe, expect, it } from 'vitest'
import { nextTick } from 'vue'
import { createI18n } from 'vue-i18n'
import { RowPlaces, SyncDashboard, WishList, type Overview } from '../../src'
import { answers, answersOf, unmasked } from '../answers'

const toneOfState: Record<string, string> = {
  synced: 'ok',
  catching_up: 'busy',
  unreachable: 'busy',
  stalled: 'busy',
  awaiting_fix: 'fix',
}

describe('SyncDashboard', () => {
  for (const [name, overview] of answersOf('overview')) {
    it(`draws ${name}: the banner, the replicas worst first, the tables, the problems`, () => {
      const o = unmasked(overview as Overview)
      const w = mount(SyncDashboard, { props: { overview: o } })
      const banner = w.get('.msd-banner')
      const state = name.replace(/^overview-/, '')
      if (toneOfState[state]) expect(banner.attributes('data-tone')).toBe(toneOfState[state])
      // The tone in a word as well as a colour.
      expect(banner.get('.msd-mark').text()).toMatch(/In sync|On its way|Needs a fix/)
      expect(banner.get('.msd-banner-sentence').text()).toMatch(/\.$/)
      const shown = w.findAll('.msd-replica').map((r) => r.attributes('data-state'))
      const rank = ['awaiting_fix', 'unreachable', 'stalled', 'catching_up', 'synced']
      expect(shown).toEqual([...shown].sort((a, b) => rank.indexOf(a!) - rank.indexOf(b!)))
      expect(shown.length).toBe(o.replicas.first.length)
      expect(w.findAll('.msd-table tbody tr').length).toBe(o.tables.length)
      const problems = w.findAll('.msd-problem')
      const listed = ['drift', 'set_aside', 'refused', 'inbox', 'failing', 'stalled'].reduce(
        (n, k) => n + (o.health as unknown as Record<string, { first: unknown[] }>)[k].first.length,
        o.health.notes.pending > 0 ? 1 : 0,
      )
      expect(problems.length).toBe(listed)
    })
  }

  it('says where things stand in red, naming how many wait for a fix', () => {
    const w = mount(SyncDashboard, { props: { overview: answers['overview-awaiting_fix'] } })
    expect(w.get('.msd-banner').text()).toContain('1 replica of 3 waits for a fix to be deployed.')
    expect(w.get('.msd-replica').attributes('data-state')).toBe('awaiting_fix')
  })

  it('shows each problem’s reason and whether it waits for the network or a fix', () => {
    const w = mount(SyncDashboard, { props: { overview: unmasked(answers['overview-every-problem']), names: {} } })
    const inbox = w.get('.msd-problem[data-kind="inbox"]')
    expect(inbox.text()).toContain('violates check constraint "receipts_total_cents_check"')
    expect(inbox.text()).toContain('Waits for a fix to be deployed')
    expect(w.get('.msd-problem[data-kind="failing"]').text()).toContain('Waits for the network')
  })

  it('puts the host’s names on the engine’s ids and its labels on tables', () => {
    const o = answers['overview-catching_up'] as Overview
    const w = mount(SyncDashboard, {
      props: { overview: o, names: { R0: 'Front till' }, labels: { products: 'Products' } },
    })
    expect(w.text()).toContain('Front till')
    expect(w.get('.msd-table tbody tr[data-table="products"] th').text()).toBe('Products')
  })

  it('emits what the user picked: a replica, a page, a state (which starts at its first page)', async () => {
    const o = answers['overview-catching_up'] as Overview
    const many = { ...o, replicas: { ...o.replicas, total: 30 } }
    const w = mount(SyncDashboard, { props: { overview: many, pageSize: 2 } })
    await w.get('.msd-replica-pick').trigger('click')
    expect(w.emitted('update:selected')![0]).toEqual(['R0'])
    await w.findAll('.msd-pages button')[1].trigger('click')
    expect(w.emitted('update:offset')![0]).toEqual([2])
    await w.get('.msd-filter button[data-state="catching_up"]').trigger('click')
    expect(w.emitted('update:filter')![0]).toEqual(['catching_up'])
    expect(w.emitted('update:offset')!.at(-1)).toEqual([0])
  })

  it('shows a listing’s page when the host fetched one, saying which of how many', () => {
    for (const [name, listing] of answersOf('listing')) {
      const w = mount(SyncDashboard, { props: { overview: answers['overview-synced'], listing } })
      const l = listing as { total: number; replicas: unknown[] }
      expect(w.findAll('.msd-replica').length, name).toBe(l.replicas.length)
      expect(w.get('.msd-page-sentence').text(), name).toMatch(l.total > 1 ? /Showing 1–\d+ of \d+\./ : /only replica|No replica/)
    }
  })

  it('without a listing, says the overview shows the worst of how many', () => {
    const w = mount(SyncDashboard, { props: { overview: answers['overview-synced'] } })
    expect(w.get('.msd-page-sentence').text()).toBe('The 3 that need attention most, of 3 in all.')
  })

  it('shows the progress of the replica picked, table by table', () => {
    const progress = answers['progress-every-state'] as { replicas: { replica: string }[] }
    const replica = progress.replicas[0].replica
    const w = mount(SyncDashboard, { props: { overview: answers['overview-synced'], progress, selected: replica } })
    const rows = w.findAll('.msd-progress tbody tr')
    expect(rows.length).toBe(4)
    expect(w.get('.msd-progress tr[data-table="brands"]').text()).toContain('holds 1 of 1')
    expect(w.get('.msd-progress tr[data-table="products"]').text()).toContain('holds 0 of 2')
  })

  it('refuses an answer of another contract, saying so, and draws nothing of it', () => {
    const later = { ...(answers['overview-synced'] as object), contract: 99 }
    const w = mount(SyncDashboard, { props: { overview: later } })
    expect(w.get('[role="alert"]').text()).toContain('contract 99')
    expect(w.find('.msd-banner').exists()).toBe(false)
    expect(w.find('.msd-replica').exists()).toBe(false)
  })

  it('keeps the last answer and says why a read failed', () => {
    const w = mount(SyncDashboard, { props: { overview: answers['overview-synced'], error: 'connection refused' } })
    expect(w.get('.msd-failed').text()).toContain('connection refused')
    expect(w.find('.msd-banner').exists()).toBe(true)
  })

  it('speaks the host’s vue-i18n locale, and follows it when it changes', async () => {
    const i18n = createI18n({ legacy: false, locale: 'es', messages: {} })
    const w = mount(SyncDashboard, { props: { overview: answers['overview-synced'] }, global: { plugins: [i18n] } })
    expect(w.get('.msd-banner-sentence').text()).toBe('Todo está sincronizado: las 3 réplicas tienen lo que deben.')
    i18n.global.locale.value = 'en'
    await nextTick()
    expect(w.get('.msd-banner-sentence').text()).toBe('Everything is in sync: all 3 replicas hold what they should.')
  })

  it('speaks the locale prop over the host’s', () => {
    const i18n = createI18n({ legacy: false, locale: 'en', messages: {} })
    const w = mount(SyncDashboard, {
      props: { overview: answers['overview-synced'], locale: 'es' },
      global: { plugins: [i18n] },
    })
    expect(w.get('.msd-banner .msd-mark').text()).toContain('Sincronizado')
  })

  it('is reached by keyboard: every control is a button, a state in a word beside its colour', () => {
    const w = mount(SyncDashboard, { props: { overview: unmasked(answers['overview-every-problem']) } })
    for (const control of w.findAll('.msd-filter > *, .msd-replica-pick')) {
      expect(control.element.tagName).toBe('BUTTON')
    }
    for (const mark of w.findAll('.msd-mark')) expect(mark.text().replace(/^[✓…!]\s*/, '').length).toBeGreaterThan(0)
  })
})

describe('a table that differs from its declaration', () => {
  const drift = unmasked(answers['overview-drift'] as Overview)

  it('is a problem waiting for a fix, first, with the statement that mends it to copy', async () => {
    const written: string[] = []
    const clipboard = { writeText: async (text: string) => void written.push(text) }
    Object.defineProperty(globalThis.navigator, 'clipboard', { value: clipboard, configurable: true })
    const w = mount(SyncDashboard, { props: { overview: drift } })
    const problem = w.get('.msd-problem')
    expect(problem.attributes('data-kind')).toBe('drift')
    expect(problem.attributes('data-remedy')).toBe('fix')
    expect(problem.text()).toContain(
      'shop.products differs from its declaration: column vat_rate (integer) was added (found 5 minutes ago).',
    )
    expect(problem.text()).toContain('Waits for a fix to be deployed')
    expect(problem.get('.msd-fix-advice').text()).toBe('Declare it again (in the migration that changed it)')
    const statement = `SELECT sync.declare_table('"shop"."products"', sync => 'broadcast');`
    expect(problem.get('pre.msd-statement').text()).toBe(statement)
    expect(problem.get('.msd-fix-sentence').text()).toBe('Run this statement; the engine then goes on by itself.')
    await problem.get('button.msd-copy').trigger('click')
    await flushPromises()
    expect(written).toEqual([statement])
    expect(problem.get('.msd-copied').text()).toBe('Copied.')
  })

  it('says when the statement could not be copied, so a person selects it', async () => {
    const clipboard = { writeText: async () => Promise.reject(new Error('denied')) }
    Object.defineProperty(globalThis.navigator, 'clipboard', { value: clipboard, configurable: true })
    const w = mount(SyncDashboard, { props: { overview: drift } })
    await w.get('.msd-problem[data-kind="drift"] button.msd-copy').trigger('click')
    await flushPromises()
    expect(w.get('.msd-copied').text()).toBe('Could not copy: select the statement and copy it.')
  })

  it('turns the banner red, saying the database differs and how many replicas wait', () => {
    const w = mount(SyncDashboard, { props: { overview: drift } })
    expect(w.get('.msd-banner').attributes('data-tone')).toBe('fix')
    expect(w.get('.msd-banner-sentence').text()).toBe(
      '1 difference between the database and its declarations waits for its statement to be run. ' +
        '6 replicas of 6 wait for a fix to be deployed.',
    )
  })

  it('has every replica awaiting the fix say why', () => {
    const w = mount(SyncDashboard, { props: { overview: drift, locale: 'es' } })
    const replicas = w.findAll('.msd-replica')
    expect(replicas.length).toBe(6)
    for (const r of replicas) {
      expect(r.attributes('data-state')).toBe('awaiting_fix')
      expect(r.text()).toContain('Espera que la base de datos vuelva a coincidir con sus declaraciones')
    }
  })
})

describe('every other answer', () => {
  for (const [name, health] of answersOf('health')) {
    it(`draws the problems of ${name}, each with its reason and remedy`, () => {
      const { contract: _c, now: _n, ...figures } = unmasked(health) as Record<string, unknown>
      const o = answers['overview-synced'] as Overview
      const w = mount(SyncDashboard, { props: { overview: { ...o, health: figures, healthy: figures.healthy } } })
      const h = figures as unknown as Record<string, { first: unknown[] }> & { notes: { pending: number } }
      const listed = ['drift', 'set_aside', 'refused', 'inbox', 'failing', 'stalled'].reduce((n, k) => n + h[k].first.length, h.notes.pending > 0 ? 1 : 0)
      expect(w.findAll('.msd-problem').length).toBe(listed)
      for (const p of w.findAll('.msd-problem')) expect(p.text()).toMatch(/Waits for (the network|a fix)/)
      if (listed === 0) expect(w.text()).toContain('Nothing waits: no problem to show.')
    })
  }

  for (const [name, progress] of answersOf('progress')) {
    it(`draws the progress of ${name} for the replica picked`, () => {
      const p = progress as { replicas: { replica: string; tables: { holds: number; outdated: number; should: number }[] }[] }
      const picked = p.replicas[0]?.replica ?? null
      const w = mount(SyncDashboard, { props: { overview: answers['overview-synced'], progress, selected: picked } })
      const rows = w.findAll('.msd-progress tbody tr')
      expect(rows.length).toBe(p.replicas[0]?.tables.length ?? 0)
      rows.forEach((row, i) => {
        const t = p.replicas[0].tables[i]
        expect(row.text()).toContain(`holds ${t.holds - t.outdated} of ${t.should}`)
      })
    })
  }

  for (const [name, explain] of answersOf('explain')) {
    it(`explains ${name} in sentences under its replica, once its "why?" is asked`, () => {
      const e = explain as { replica: string; table: string; key: string; state: string | null; kept_away: unknown[] }
      const place = { replica: e.replica, state: e.state ?? 'missing', confirmed: false, leaving: null, newest_note: null, note: null, refused: null, sent: null }
      const places = { contract: 1, now: '<time>', table: e.table, key: e.key, unconcerned: 0, places: [place] }
      const w = mount(RowPlaces, { props: { places, explain, explained: e.replica, names: { [e.replica]: 'Front' } } })
      const sentences = w.findAll('.msd-explain li').map((li) => li.text())
      expect(sentences[0]).toMatch(/^Front .*, and should (not )?hold it\.$/)
      expect(sentences.length).toBeGreaterThan(e.kept_away.length)
    })
  }
})

describe('RowPlaces', () => {
  for (const [name, places] of answersOf('row-progress')) {
    it(`shows where the row of ${name} is on each replica`, () => {
      const w = mount(RowPlaces, { props: { places } })
      const p = places as { places: { state: string }[] }
      expect(w.findAll('.msd-place').map((x) => x.attributes('data-state'))).toEqual(p.places.map((x) => x.state))
    })
  }

  it('explains a row no rule sends there by what the rule read of it', () => {
    const e = answers['explain-no-rule'] as { replica: string; table: string; key: string }
    const owner = '00000000-0000-0000-0000-00000000000a'
    const place = { replica: e.replica, state: 'missing', confirmed: false, leaving: null, newest_note: null, note: null, refused: null, sent: null }
    const places = { contract: 1, now: '<time>', table: e.table, key: e.key, unconcerned: 0, places: [place] }
    const w = mount(RowPlaces, {
      props: { places, explain: e, explained: e.replica, names: { [e.replica]: 'Back', [owner]: 'Front' } },
    })
    expect(w.findAll('.msd-explain li').map((li) => li.text())).toEqual([
      'Back does not hold it, and should not hold it.',
      `Its rule (assigned) sends it to Front alone (register_id = ${owner}).`,
    ])
  })

  it('says a replica refused the row and why, and explains it when asked', async () => {
    const places = answers['row-progress-refused']
    const explain = answers['explain-refused'] as { replica: string }
    const w = mount(RowPlaces, { props: { places, explain, names: { [explain.replica]: 'Bar' } } })
    expect(w.get('.msd-place').text()).toContain('Has it set aside. Refused it: CHECK (calories >= 0) failed.')
    await w.get('.msd-place button').trigger('click')
    expect(w.emitted('update:explained')![0]).toEqual([explain.replica])
    await w.setProps({ explained: explain.replica })
    expect(w.get('.msd-explain').text()).toContain('Bar has it set aside, and should hold it.')
  })
})

describe('WishList', () => {
  it('lists the wishes, those that need attention first, with the replica’s answer', () => {
    const w = mount(WishList, { props: { wishes: answers['wishes-every-state'] } })
    const items = w.findAll('.msd-wish')
    expect(items.map((i) => i.attributes('data-state'))).toEqual(['refused', 'waiting', 'pending', 'applied'])
    expect(items[0].text()).toContain('Refused')
    expect(items[0].text()).toContain('longer than the printer')
    expect(items[1].text()).toContain('the printer is off')
  })
})
