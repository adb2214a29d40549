// Every answer the engine gave for the dashboard to read: the golden files
// of every read in every state (tests/golden/status/) and the dashboard's
// fixtures (fixtures/). Each by its file name, without `.json`.
const golden = import.meta.glob('../../tests/golden/status/*.json', { eager: true, import: 'default' })
const fixtures = import.meta.glob('../fixtures/*.json', { eager: true, import: 'default' })

export const answers: Record<string, unknown> = Object.fromEntries(
  Object.entries({ ...golden, ...fixtures }).map(([path, value]) => [path.replace(/^.*\//, '').replace(/\.json$/, ''), value]),
)

/** The answers of one read, by name: `overview` gives overview-synced, overview-stalled, ... */
export function answersOf(read: string): [string, unknown][] {
  return Object.entries(answers).filter(([name]) => name.startsWith(`${read}-`))
}

/**
 * An answer with its masked times put back, as a real one has them: `now`
 * at `at`, every other time `before` ms earlier.
 */
export function unmasked<T>(value: T, at = '2026-12-01T10:00:00.000+00:00', before = 300_000): T {
  const earlier = new Date(Date.parse(at) - before).toISOString()
  const walk = (v: unknown, key: string): unknown => {
    if (v === '<masked>' || v === '<time>') {
      if (key === 'now') return at
      if (key === 'oldest_age_seconds') return before / 1000
      return earlier
    }
    if (Array.isArray(v)) return v.map((x) => walk(x, key))
    if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x, k)]))
    return v
  }
  return walk(value, '') as T
}
