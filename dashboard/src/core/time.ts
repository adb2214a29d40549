// How long ago something happened, by the server's clock only: an answer's
// `now` is when the server read, and the page moves it on by the time it
// has measured itself since the answer arrived. The browser's clock is
// never compared with the server's.

/** The server's clock as one answer set it. */
export interface ServerClock {
  /** The answer's `now`, in milliseconds since the epoch. */
  server: number
  /** The page's monotonic time (performance.now()) when it arrived. */
  page: number
}

/**
 * A time the server wrote (PostgreSQL's timestamptz in JSON), in ms since
 * the epoch, or null for anything else. PostgreSQL writes microseconds;
 * Date.parse is only sure of milliseconds.
 */
export function parseServerTime(text: unknown): number | null {
  if (typeof text !== 'string') return null
  const m = /^(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}:\d{2})(?:\.(\d+))?(Z|[+-]\d{2}(?::?\d{2})?)?$/.exec(text)
  if (!m) return null
  const fraction = (m[3] ?? '').padEnd(3, '0').slice(0, 3)
  let zone = m[4] ?? 'Z'
  if (/^[+-]\d{2}$/.test(zone)) zone += ':00'
  else if (/^[+-]\d{4}$/.test(zone)) zone = `${zone.slice(0, 3)}:${zone.slice(3)}`
  const ms = Date.parse(`${m[1]}T${m[2]}.${fraction}${zone}`)
  return Number.isNaN(ms) ? null : ms
}

/** The clock an answer sets, arriving at the page's time `page`. */
export function clockOf(answer: { now: string } | null | undefined, page: number): ServerClock | null {
  const server = parseServerTime(answer?.now)
  return server === null ? null : { server, page }
}

/** The server's time now, as far as the page can tell. */
export function serverNow(clock: ServerClock, page: number): number {
  return clock.server + Math.max(0, page - clock.page)
}

/** How long ago (ms) the server's time `at` was, or null if unknown. */
export function ageOf(at: unknown, clock: ServerClock | null, page: number): number | null {
  const when = parseServerTime(at)
  if (when === null || clock === null) return null
  return Math.max(0, serverNow(clock, page) - when)
}

/**
 * Whether a replica last heard at `heardAt` has been silent longer than
 * `silentAfter` ms. One never heard from is told apart, not silent.
 */
export function isSilent(heardAt: unknown, clock: ServerClock | null, page: number, silentAfter: number): boolean {
  const age = ageOf(heardAt, clock, page)
  return age !== null && age > silentAfter
}
