// @vitest-environment node
// The sentences of magic_sync_dashboard/core, in English and Spanish: every
// state, every kind of problem, plural forms, and ages by the server's clock.
import { describe, expect, it } from 'vitest'
import {
  ageOf,
  bannerOf,
  clockOf,
  explainOf,
  fixOf,
  isSilent,
  languages,
  parseServerTime,
  placesOf,
  problemsOf,
  progressOf,
  replicaLine,
  statesOf,
  wishLines,
  wordsFor,
  type Context,
  type Explain,
  type Health,
  type Listing,
  type Overview,
  type Progress,
  type RowProgress,
  type WishListing,
  type Words,
} from '../../src/core'
import { answers, answersOf, unmasked } from '../answers'

const at = '2026-12-01T10:00:00.000+00:00'
function context(words: Words, overrides: Partial<Context> = {}): Context {
  return { words, clock: clockOf({ now: at }, 0), page: 0, silentAfter: 15 * 60_000, ...overrides }
}
const both = [languages.en, languages.es]

describe('the states', () => {
  const overview = unmasked(answers['overview-every-problem'] as Overview)

  it('are every state the engine counts, worst first', () => {
    const engine = Object.keys(overview.states)
    expect(statesOf(overview).sort()).toEqual([...engine].sort())
    const worstFirst = ['awaiting_fix', 'unreachable', 'stalled', 'catching_up', 'synced'].filter((s) => engine.includes(s))
    expect(statesOf(overview)).toEqual(worstFirst)
  })

  for (const words of both) {
    it(`each have a name and a sentence of why, in ${words.locale}`, () => {
      const replicas = [...answersOf('listing'), ...answersOf('overview')].flatMap(([, v]) => {
        const a = unmasked(v) as Listing | Overview
        return 'first' in (a as Overview).replicas ? (a as Overview).replicas.first : (a as Listing).replicas
      })
      const seen = new Set<string>()
      for (const r of replicas) {
        const line = replicaLine(r, context(words))
        seen.add(r.state)
        expect(line.stateLabel, r.state).toBe(words.state[r.state as keyof Words['state']])
        expect(line.reasons.length, `${r.state} says why`).toBeGreaterThan(0)
        for (const s of line.reasons) expect(s).toMatch(/^\S.*[.)]$/)
      }
      expect([...seen].sort()).toEqual(Object.keys(overview.states).sort())
    })
  }

  it('say why in the words of the state', () => {
    const byState = Object.fromEntries(overview.replicas.first.map((r) => [r.state, replicaLine(r, context(languages.en))]))
    expect(byState.synced.reasons).toContain('Holds what it should; everything it wrote is filed.')
    expect(byState.unreachable.reasons[0]).toBe(
      '4 sends failed in a row, the last 5 minutes ago: no responders available for request.',
    )
    expect(byState.awaiting_fix.reasons.join(' ')).toMatch(/rows? it refused|uploads? of its/)
    expect(byState.stalled.reasons[0]).toMatch(/^1 message waits for it, and it has applied nothing for 5 minutes\.$/)
    expect(byState.stalled.stateLabel).toBe('Not moving')
    expect(byState.stalled.tone).toBe('busy')
    expect(byState.catching_up.reasons).toContain('1 wish not answered yet.')
  })

  it('tell the backlog as of when it was said', () => {
    const r = overview.replicas.first.find((x) => x.backlog.tables.length > 0)!
    expect(replicaLine(r, context(languages.en)).reasons).toContain(
      '2 rows it wrote are not sent, 3 not filed, as it said 5 minutes ago.',
    )
    expect(replicaLine(r, context(languages.es)).reasons).toContain(
      '2 filas que escribió no están enviadas, 3 sin archivar, según dijo hace 5 minutos.',
    )
  })
})

describe('the banner', () => {
  const cases: [string, 'ok' | 'busy' | 'fix', string, string][] = [
    ['overview-synced', 'ok', 'Everything is in sync: all 3 replicas hold what they should.', 'Todo está sincronizado: las 3 réplicas tienen lo que deben.'],
    ['overview-catching_up', 'busy', 'Changes are on their way to 3 replicas of 3.', 'Hay cambios en camino a 3 réplicas de 3.'],
    ['overview-awaiting_fix', 'fix', '1 replica of 3 waits for a fix to be deployed.', '1 réplica de 3 espera que se despliegue un arreglo.'],
  ]
  for (const [name, tone, en, es] of cases) {
    it(`is ${tone} over ${name}, in a sentence in each language`, () => {
      const o = answers[name] as Overview
      expect(bannerOf(o, context(languages.en))).toMatchObject({ tone, sentence: en })
      expect(bannerOf(o, context(languages.es))).toMatchObject({ tone, sentence: es })
    })
  }

  it('is amber while a replica is out of reach or not moving', () => {
    for (const name of ['overview-unreachable', 'overview-stalled']) {
      if (!answers[name]) continue
      const banner = bannerOf(answers[name] as Overview, context(languages.en))
      expect(banner.tone, name).toBe('busy')
      expect(banner.sentence, name).toMatch(/out of reach|not moving/)
    }
  })

  it('is red when something waits for a fix that no replica owns', () => {
    const o = answers['overview-synced'] as Overview
    const unhealthy: Overview = {
      ...o,
      healthy: false,
      health: { ...o.health, healthy: false, set_aside: { total: 1, first: (answers['health-set-aside'] as Health).set_aside.first } },
    }
    expect(bannerOf(unhealthy, context(languages.en))).toMatchObject({
      tone: 'fix',
      sentence: '1 problem waits for a fix to be deployed.',
    })
  })
})

describe('the problems', () => {
  const health = [answers['health-every-problem'], answers['health-set-aside']].map((h) => unmasked(h as Health))
  for (const words of both) {
    it(`are each a sentence with a reason and a remedy, fixes first, in ${words.locale}`, () => {
      const problems = health.flatMap((h) => problemsOf(h, context(words)))
      expect(new Set(problems.map((p) => p.kind))).toEqual(new Set(['set_aside', 'refused', 'inbox', 'failing', 'stalled']))
      for (const p of problems) {
        expect(p.remedySentence).toBe(words.remedy[p.remedy])
        expect(p.sentence).toMatch(/\.$/)
      }
      const first = problemsOf(health[0], context(words))
      expect(first.findIndex((p) => p.remedy === 'wait')).toBeGreaterThan(first.findLastIndex((p) => p.remedy === 'fix'))
    })
  }

  it('name the replica and the database’s reason', () => {
    const names = { [(health[0].inbox.first[0]).replica]: 'Kiosk' }
    const problems = problemsOf(health[0], context(languages.en, { names }))
    const inbox = problems.find((p) => p.kind === 'inbox')!
    expect(inbox.sentence).toBe(
      `An upload from Kiosk to receipts (${health[0].inbox.first[0].key}) is kept in the inbox: new row for relation "receipts" violates check constraint "receipts_total_cents_check".`,
    )
    expect(inbox.remedy).toBe('fix')
    expect(problems.find((p) => p.kind === 'failing')!.remedySentence).toMatch(/network/)
    expect(problems.find((p) => p.kind === 'stalled')!.sentence).toMatch(/applied nothing for 5 minutes while 1 message waits for it\.$/)
  })

  it('count changes not yet planned, the oldest by its age', () => {
    const h = health[0]
    const noted: Health = { ...h, notes: { ...h.notes, pending: 12, oldest_at: '2026-12-01T09:59:30+00:00' } }
    expect(problemsOf(noted, context(languages.en))[0]).toBeDefined()
    const notes = problemsOf(noted, context(languages.en)).find((p) => p.kind === 'notes')!
    expect(notes.sentence).toBe('12 changes are not planned yet; the oldest was noted 30 seconds ago.')
    expect(notes.remedy).toBe('wait')
  })
})

describe('a drift', () => {
  const health = unmasked(answers['health-drift'] as Health)
  const overview = unmasked(answers['overview-drift'] as Overview)
  const statement = `SELECT sync.declare_table('"shop"."products"', sync => 'broadcast');`

  it('is a problem waiting for a fix, first, saying what differs and since when, in each language', () => {
    const [en] = problemsOf(health, context(languages.en))
    expect(en).toMatchObject({
      kind: 'drift',
      remedy: 'fix',
      replica: null,
      sentence: 'shop.products differs from its declaration: column vat_rate (integer) was added (found 5 minutes ago).',
      fix: {
        advice: ['Declare it again (in the migration that changed it)'],
        statement,
        sentence: 'Run this statement; the engine then goes on by itself.',
      },
    })
    const [es] = problemsOf(health, context(languages.es))
    expect(es.sentence).toBe(
      'shop.products differs from its declaration: column vat_rate (integer) was added (hallado hace 5 minutos).',
    )
    expect(es.fix!.sentence).toBe('Ejecute esta sentencia; luego el motor sigue solo.')
    expect(es.remedySentence).toBe(languages.es.remedy.fix)
  })

  it('gives the other problems no statement', () => {
    for (const p of problemsOf(health, context(languages.en)).filter((x) => x.kind !== 'drift')) expect(p.fix).toBeNull()
  })

  it('has each replica awaiting it say why, in each language', () => {
    for (const r of overview.replicas.first) {
      expect(replicaLine(r, context(languages.en)).reasons[0]).toBe(
        'It waits for the database to match its declarations again: run the statement shown under what the engine waits on.',
      )
      expect(replicaLine(r, context(languages.es)).reasons[0]).toMatch(/^Espera que la base de datos vuelva a coincidir/)
    }
  })

  it('is said first in the banner, with the replicas that wait', () => {
    expect(bannerOf(overview, context(languages.en))).toMatchObject({
      tone: 'fix',
      sentence:
        '1 difference between the database and its declarations waits for its statement to be run. ' +
        '6 replicas of 6 wait for a fix to be deployed.',
    })
    expect(bannerOf(overview, context(languages.es)).sentence).toBe(
      '1 diferencia entre la base de datos y sus declaraciones espera que se ejecute su sentencia. ' +
        '6 réplicas de 6 esperan que se despliegue un arreglo.',
    )
    expect(languages.en.drifted(2)).toBe(
      '2 differences between the database and its declarations wait for their statements to be run.',
    )
  })

  it('splits every form of the engine’s fix into its words and the statement to run', () => {
    expect(fixOf("Declare the replicas again: SELECT sync.declare_replicas('shop.registers', live => 'active', id => 'id');", languages.en)).toEqual({
      advice: ['Declare the replicas again'],
      statement: "SELECT sync.declare_replicas('shop.registers', live => 'active', id => 'id');",
      sentence: 'Run this statement; the engine then goes on by itself.',
    })
    const trigger = 'DROP TRIGGER IF EXISTS t ON shop.products;\nCREATE TRIGGER t AFTER INSERT ON shop.products FOR EACH ROW EXECUTE FUNCTION f();'
    expect(fixOf(trigger, languages.en)).toEqual({
      advice: [],
      statement: trigger,
      sentence: 'Run these 2 statements; the engine then goes on by itself.',
    })
    expect(fixOf('Put the column back:\nThen declare again:\nSELECT sync.declare_table(\'shop.products\');', languages.en)).toMatchObject({
      advice: ['Put the column back', 'Then declare again'],
      statement: "SELECT sync.declare_table('shop.products');",
    })
    expect(fixOf('Restore the table from a backup.', languages.es)).toEqual({
      advice: ['Restore the table from a backup.'],
      statement: null,
      sentence: 'El motor no da ninguna sentencia que ejecutar: haga lo que dice.',
    })
  })
})

describe('plural forms', () => {
  it('take English’s one and other', () => {
    expect(languages.en.pending(1)).toBe('1 change on its way.')
    expect(languages.en.pending(2)).toBe('2 changes on their way.')
    expect(languages.en.pending(0)).toBe('0 changes on their way.')
    expect(languages.en.pending(3000000)).toBe('3,000,000 changes on their way.')
  })

  it('take Spanish’s one, many and other', () => {
    expect(languages.es.pending(1)).toBe('1 cambio en camino.')
    expect(languages.es.pending(5)).toBe('5 cambios en camino.')
    expect(languages.es.pending(1000000)).toBe('1.000.000 cambios en camino.')
    expect(languages.es.outOfReach(1)).toBe('1 réplica está fuera de alcance; la red lo resolverá.')
    expect(languages.es.outOfReach(2)).toBe('2 réplicas están fuera de alcance; la red lo resolverá.')
  })

  it('follow the locale asked for', () => {
    expect(wordsFor('es-MX').locale).toBe('es')
    expect(wordsFor('en-GB').locale).toBe('en')
    expect(wordsFor('fr').locale).toBe('en')
    expect(wordsFor(null).locale).toBe('en')
  })
})

describe('time', () => {
  it('reads the server’s times as PostgreSQL writes them, microseconds and all', () => {
    expect(parseServerTime('2026-12-01T10:00:00.123456+00:00')).toBe(Date.parse('2026-12-01T10:00:00.123Z'))
    expect(parseServerTime('2026-12-01 12:00:00+02')).toBe(Date.parse('2026-12-01T10:00:00Z'))
    expect(parseServerTime('<masked>')).toBeNull()
  })

  it('measures ages from the answer’s now, moved on by the page’s own clock', () => {
    const clock = clockOf({ now: '2026-12-01T10:00:00+00:00' }, 5_000)
    // Two seconds of the page later, something the server saw at 09:59:00 is 62 s old.
    expect(ageOf('2026-12-01T09:59:00+00:00', clock, 7_000)).toBe(62_000)
    // The page's clock going back (it never does) does not make an age younger than at the read.
    expect(ageOf('2026-12-01T09:59:00+00:00', clock, 1_000)).toBe(60_000)
    expect(ageOf('2026-12-01T09:59:00+00:00', null, 7_000)).toBeNull()
  })

  it('never compares the browser’s wall clock with the server’s', () => {
    const realNow = Date.now
    Date.now = () => 0
    try {
      const clock = clockOf({ now: '2030-01-01T00:00:00+00:00' }, 0)
      expect(ageOf('2029-12-31T23:59:00+00:00', clock, 0)).toBe(60_000)
    } finally {
      Date.now = realNow
    }
  })

  it('calls a replica silent longer than silent-after not answering', () => {
    const clock = clockOf({ now: '2026-12-01T10:00:00+00:00' }, 0)
    expect(isSilent('2026-12-01T09:59:31+00:00', clock, 0, 30_000)).toBe(false)
    expect(isSilent('2026-12-01T09:59:29+00:00', clock, 0, 30_000)).toBe(true)
    expect(isSilent('2026-12-01T09:59:31+00:00', clock, 2_000, 30_000)).toBe(true)
    const r = (unmasked(answers['overview-synced']) as Overview).replicas.first[0]
    const line = replicaLine(r, context(languages.en, { silentAfter: 60_000 }))
    expect(line.silent).toBe(true)
    expect(line.reasons[0]).toBe('Not answering: last heard 5 minutes ago.')
    expect(replicaLine(r, context(languages.es, { silentAfter: 60_000 })).reasons[0]).toBe(
      'No responde: se la oyó por última vez hace 5 minutos.',
    )
  })
})

describe('one replica, one row, the wishes', () => {
  it('tell progress as "holds 480 of 500", an older version not counted', () => {
    const [view] = progressOf(answers['progress-every-state'] as Progress, context(languages.en))
    const products = view.tables.find((t) => t.table === 'products')!
    expect(products.holds).toBe('holds 0 of 2')
    const brands = view.tables.find((t) => t.table === 'brands')!
    expect(brands.holds).toBe('holds 1 of 1')
    expect(progressOf(answers['progress-on-its-way'] as Progress, context(languages.es))[0].tables[1].holds).toBe('tiene 0 de 3')
  })

  for (const words of both) {
    it(`tell where a row is and why, in ${words.locale}`, () => {
      for (const [name, value] of answersOf('row-progress')) {
        const view = placesOf(value as RowProgress, context(words))
        for (const line of view.lines) expect(line.sentence, name).toMatch(words.place[line.state].slice(0, -1))
      }
      for (const [name, value] of answersOf('explain')) {
        const sentences = explainOf(value as Explain, context(words))
        expect(sentences.length, name).toBeGreaterThan((value as Explain).kept_away.length)
        for (const s of sentences) expect(s, name).not.toMatch(/undefined|\[object/)
      }
    })
  }

  it('explain a row refused with the replica’s reason', () => {
    expect(explainOf(answers['explain-refused'] as Explain, context(languages.en))).toEqual([
      '00000000-0000-0000-0000-00000000000a has it set aside, and should hold it.',
      'It follows products 00000000-0000-0000-0000-000000000001, which goes there.',
      'The replica refused it: CHECK (calories >= 0) failed.',
    ])
  })

  it('explain a row no rule sends there by what its rule read, for every rule', () => {
    const a = '00000000-0000-0000-0000-00000000000a'
    const b = '00000000-0000-0000-0000-00000000000b'
    const names = { [a]: 'Front', [b]: 'Back' }
    const en = (name: string) => explainOf(answers[name] as Explain, context(languages.en, { names }))
    const es = (name: string) => explainOf(answers[name] as Explain, context(languages.es, { names }))
    expect(en('explain-no-rule')[1]).toBe(`Its rule (assigned) sends it to Front alone (register_id = ${a}).`)
    expect(es('explain-no-rule')[1]).toBe(`Su regla (assigned) la envía solo a Front (register_id = ${a}).`)
    expect(en('explain-leaving')).toEqual([
      'Front is letting it go, and should not hold it.',
      `Its rule (assigned) sends it to Back alone (register_id = ${b}).`,
    ])
    expect(en('explain-no-rule-follows')[1]).toBe(
      'It follows products (product_id = 00000000-0000-0000-0000-000000000003), which this replica should not hold.',
    )
    expect(es('explain-no-rule-follows')[1]).toBe(
      'Sigue a products (product_id = 00000000-0000-0000-0000-000000000003), que esta réplica no debe tener.',
    )
    expect(en('explain-no-rule-none')[1]).toBe(
      'Its table has no rule of its own (none): it goes only where a row held there points at it, and none does.',
    )
  })

  it('explain an assigned row whose replica is not live or not known, and a grouped row by its groups', () => {
    const e = answers['explain-no-rule'] as Explain
    const noRule = e.kept_away[0] as Extract<Explain['kept_away'][number], { reason: 'no_rule' }>
    const said = (k: typeof noRule, words = languages.en) => explainOf({ ...e, kept_away: [k] }, context(words))[1]
    const owner = noRule.values[0]
    expect(said({ ...noRule, belongs_to: { replica: owner, live: false } })).toBe(
      `Its rule (assigned) sends it to ${owner} alone (register_id = ${owner}), and ${owner} is not live.`,
    )
    expect(said({ ...noRule, belongs_to: null })).toBe(
      `Its rule (assigned) sends it to the replica register_id = ${owner} names, and the engine knows no such replica.`,
    )
    const grouped = { ...noRule, rule: 'grouped', columns: [], values: [], belongs_to: null }
    expect(said({ ...grouped, groups: 0 })).toBe(
      'Its rule (grouped) sends it to the replicas of its groups, and it is a member of none.',
    )
    expect(said({ ...grouped, groups: 1 })).toBe(
      'Its rule (grouped) sends it to the replicas of its groups: it is a member of 1, not given to this replica.',
    )
    expect(said({ ...grouped, groups: 3 }, languages.es)).toBe(
      'Su regla (grouped) la envía a las réplicas de sus grupos: es miembro de 3, ninguno dado a esta réplica.',
    )
  })

  it('list wishes with the replica’s answer and why, those needing attention first', () => {
    const lines = wishLines(answers['wishes-every-state'] as WishListing, context(languages.en))
    expect(lines.map((l) => l.state)).toEqual(['refused', 'waiting', 'pending', 'applied'])
    expect(lines[0].stateLabel).toBe('Refused')
    expect(lines[0].reason).toBe('The replica says: "A footer far too long for the printer" is longer than the printer\'s 20 characters.')
    expect(lines[1].reason).toBe('The replica says: the printer is off.')
    expect(wishLines(answers['wishes-every-state'] as WishListing, context(languages.es))[1].stateLabel).toBe('Espera en la réplica')
  })
})
