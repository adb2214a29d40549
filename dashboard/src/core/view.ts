// The answers as a person reads them: plain data and sentences, with no
// Vue in it, for the package's components and for a host that draws with
// its own parts.
import type {
  Explain,
  Health,
  KeptAway,
  Listing,
  Overview,
  OverviewHealth,
  Progress,
  Remedy,
  Replica,
  ReplicaState,
  RowProgress,
  RowState,
  TableFigures,
  WishListing,
} from './contract/types'
import { ageOf, isSilent, type ServerClock } from './time'
import { type KnownState, type Tone, type Words, languages } from './words'

/** What every sentence needs besides the answer. */
export interface Context {
  words: Words
  /** The host's names for the engine's replica ids. */
  names?: Record<string, string>
  /** The host's labels for the engine's table names. */
  labels?: Record<string, string>
  /** The server's clock, as the answer being read set it (null: not known). */
  clock: ServerClock | null
  /** The page's monotonic time now (performance.now()). */
  page: number
  /** How long (ms) a replica may be silent before it is "not answering". */
  silentAfter: number
}

/** The states, worst first, as the engine ranks them. */
export const WORST_FIRST: readonly KnownState[] = ['awaiting_fix', 'unreachable', 'stalled', 'catching_up', 'synced']

// Every state the engine answers has words here: a state added on the
// engine's side fails this line's type check until the package knows it.
type Holds<T extends true> = T
export type EveryStateHasWords = Holds<[ReplicaState] extends [KnownState] ? true : false>

/** The states an overview counts, worst first (any the package does not know, last). */
export function statesOf(overview: Overview): string[] {
  const answered = Object.keys(overview.states)
  const known = WORST_FIRST as readonly string[]
  return [...known.filter((s) => answered.includes(s)), ...answered.filter((s) => !known.includes(s))]
}

/** The colour a state is shown in (and always a word beside it). */
export function toneOf(state: string): Tone {
  if (state === 'awaiting_fix') return 'fix'
  if (state === 'synced') return 'ok'
  return 'busy'
}

export function nameOf(id: string, c: Pick<Context, 'names'>): string {
  return c.names?.[id] ?? id
}

export function labelOf(table: string, c: Pick<Context, 'labels'>): string {
  return c.labels?.[table] ?? table
}

export function stateLabel(state: string, words: Words): string {
  return (words.state as Record<string, string>)[state] ?? words.unknownState(state)
}

function agoOf(at: unknown, c: Context): string | null {
  const age = ageOf(at, c.clock, c.page)
  return age === null ? null : c.words.ago(age)
}

function spanOf(at: unknown, c: Context): string | null {
  const age = ageOf(at, c.clock, c.page)
  return age === null ? null : c.words.span(age)
}

// ---------------------------------------------------------------------------
// The banner.

export interface Banner {
  tone: Tone
  /** The tone in a word, so the colour is never alone. */
  label: string
  sentence: string
}

function count(states: Overview['states'], state: string): number {
  return (states as unknown as Record<string, number>)[state] ?? 0
}

/** Where things stand, in one sentence: red when something waits for a fix, amber while changes are on their way or a replica is out of reach, green otherwise. */
export function bannerOf(overview: Overview, c: Context): Banner {
  const w = c.words
  const total = overview.replicas.total
  const fixing = count(overview.states, 'awaiting_fix')
  if (fixing > 0 || !overview.healthy) {
    const waits = fixing > 0 ? w.waitForFix(fixing, total) : w.problemsWaitForFix(fixesIn(overview.health))
    const drifted = overview.health.drift.total
    const sentence = drifted > 0 ? `${w.drifted(drifted)} ${waits}` : waits
    return { tone: 'fix', label: w.tone.fix, sentence }
  }
  const parts: string[] = []
  const catching = count(overview.states, 'catching_up')
  const away = count(overview.states, 'unreachable')
  const stalled = count(overview.states, 'stalled')
  if (catching > 0) parts.push(w.onTheirWay(catching, total))
  if (away > 0) parts.push(w.outOfReach(away))
  if (stalled > 0) parts.push(w.notMoving(stalled))
  if (parts.length > 0) return { tone: 'busy', label: w.tone.busy, sentence: parts.join(' ') }
  return { tone: 'ok', label: w.tone.ok, sentence: total === 0 ? w.noReplica() : w.allInSync(total) }
}

/** How many of the health's items wait for a fix. */
function fixesIn(health: OverviewHealth | Health): number {
  return problemsOf(health).filter((p) => p.remedy === 'fix').length
}

// ---------------------------------------------------------------------------
// The replicas.

export interface ReplicaLine {
  id: string
  name: string
  state: ReplicaState
  stateLabel: string
  tone: Tone
  /** Silent longer than silent-after. */
  silent: boolean
  /** Why it is in its state, each a sentence. */
  reasons: string[]
}

/** One replica: its state in words, and the figures behind it as sentences. */
export function replicaLine(r: Replica, c: Context): ReplicaLine {
  const w = c.words
  const why = r.why
  const reasons: string[] = []
  const silent = r.heard_at !== null && isSilent(r.heard_at, c.clock, c.page, c.silentAfter)
  if (r.heard_at === null) reasons.push(w.neverHeard())
  else if (silent) reasons.push(w.notAnswering(agoOf(r.heard_at, c)))
  switch (r.state as string) {
    case 'synced':
      reasons.push(w.holdsWhatItShould())
      break
    case 'unreachable':
      reasons.push(w.failures(why.failures, agoOf(why.failed_at, c), why.last_error))
      break
    case 'awaiting_fix':
      if (why.drift) reasons.push(w.awaitsDrift())
      if (why.refused > 0) reasons.push(w.refusedRows(why.refused))
      if (why.kept > 0) reasons.push(w.keptUploads(why.kept))
      break
    case 'stalled':
      reasons.push(w.stalledSince(why.messages_waiting, spanOf(why.stalled_since, c)))
      break
  }
  // What is on its way, whatever the state: a replica out of reach or
  // waiting for a fix may have changes owed as well.
  if (why.pending > 0) reasons.push(w.pending(why.pending))
  if (r.owed > 0 && r.state !== 'stalled') reasons.push(w.owed(r.owed))
  if (why.unconfirmed && r.owed === 0 && r.state === 'catching_up') reasons.push(w.unconfirmed())
  if (why.provisioning) reasons.push(w.provisioning())
  if (why.set_aside > 0) reasons.push(w.setAsideOnServer(why.set_aside))
  if (why.held_back > 0) reasons.push(w.heldBack(why.held_back))
  if (why.waiting > 0) reasons.push(w.waitingUploads(why.waiting))
  if (why.backlog && r.backlog) {
    const sum = (k: 'unsent' | 'unfiled' | 'set_aside') => r.backlog.tables.reduce((n, t) => n + t[k], 0)
    reasons.push(w.backlog(sum('unsent'), sum('unfiled'), sum('set_aside'), agoOf(r.backlog.said_at, c)))
  }
  for (const kind of ['pending', 'waiting', 'refused', 'superseded'] as const) {
    if (r.wishes[kind] > 0) reasons.push(w.wishCounts(kind, r.wishes[kind]))
  }
  return {
    id: r.id,
    name: nameOf(r.id, c),
    state: r.state,
    stateLabel: stateLabel(r.state, w),
    tone: toneOf(r.state),
    silent,
    reasons,
  }
}

export interface ReplicaPage {
  lines: ReplicaLine[]
  total: number
  offset: number
  /** Which replicas these are, of how many. */
  sentence: string
  hasPrevious: boolean
  hasNext: boolean
}

/**
 * The replicas shown: the listing's page when the host fetched one, the
 * overview's worst otherwise.
 */
export function replicaPage(overview: Overview, listing: Listing | null, pageSize: number, c: Context): ReplicaPage {
  const w = c.words
  if (listing) {
    const lines = listing.replicas.map((r) => replicaLine(r, c))
    const from = listing.offset + 1
    const to = listing.offset + lines.length
    return {
      lines,
      total: listing.total,
      offset: listing.offset,
      sentence: lines.length === 0 ? w.noneInState() : w.showing(from, to, listing.total),
      hasPrevious: listing.offset > 0,
      hasNext: to < listing.total,
    }
  }
  const lines = overview.replicas.first.map((r) => replicaLine(r, c))
  return {
    lines,
    total: overview.replicas.total,
    offset: 0,
    sentence: lines.length === 0 ? w.noReplica() : w.worstOf(lines.length, overview.replicas.total),
    hasPrevious: false,
    hasNext: lines.length < overview.replicas.total && pageSize > 0,
  }
}

// ---------------------------------------------------------------------------
// The tables.

export interface TableLine {
  table: string
  label: string
  pending: number
  inFlight: number
  setAside: number
  unfiled: number
  synced: boolean
  sentence: string
}

export function tableLines(tables: TableFigures[], c: Context): TableLine[] {
  return tables.map((t) => ({
    table: t.table,
    label: labelOf(t.table, c),
    pending: t.pending,
    inFlight: t.in_flight,
    setAside: t.set_aside,
    unfiled: t.unfiled,
    synced: t.synced,
    sentence: t.synced ? c.words.tableInSync() : c.words.tableWaits(t.pending, t.in_flight, t.set_aside, t.unfiled),
  }))
}

// ---------------------------------------------------------------------------
// The problems.

export type ProblemKind = 'drift' | 'notes' | 'set_aside' | 'refused' | 'inbox' | 'failing' | 'stalled'

export interface Problem {
  kind: ProblemKind
  remedy: Remedy
  sentence: string
  /** Whether it waits for the network (or the engine) or for a fix, in words. */
  remedySentence: string
  /** The replica it is of, if one. */
  replica: string | null
  /** The fix the engine gives, as its words and the statement to run (a drift's); null when it gives none. */
  fix: Fix | null
}

/** A fix the engine gives: what to do, in its words, and the SQL to run, to copy whole. */
export interface Fix {
  /** The engine's words around the statement ("Declare it again (in the migration that changed it)"), if any. */
  advice: string[]
  /** The statement(s) to run, one a line; null when the fix holds no SQL. */
  statement: string | null
  /** What to run, in a sentence of the package's words. */
  sentence: string
}

// A line of SQL: a statement's first word, after the engine's words and a colon if any.
const SQL_LINE = /^(?:(.*?):\s*)?((?:SELECT|CREATE|DROP|ALTER|CALL|GRANT|REVOKE|COMMENT|INSERT|UPDATE|DELETE|DO|SET)\b.*)$/

/**
 * The engine's fix, split into its words and its statement: each line is
 * SQL (from its first keyword, any words before a colon kept as advice),
 * or the engine's words.
 */
export function fixOf(text: string, words: Words): Fix {
  const advice: string[] = []
  const sql: string[] = []
  for (const line of text.split('\n').map((l) => l.trim()).filter((l) => l.length > 0)) {
    const m = SQL_LINE.exec(line)
    if (!m) {
      advice.push(line.replace(/:$/, ''))
      continue
    }
    if (m[1]) advice.push(m[1])
    sql.push(m[2])
  }
  const statement = sql.length > 0 ? sql.join('\n') : null
  return { advice, statement, sentence: statement ? words.runStatement(sql.length) : words.noStatement() }
}

/** The health's items, those that wait for a fix first, each a sentence with its reason. */
export function problemsOf(health: OverviewHealth | Health, c?: Context): Problem[] {
  const ctx = c ?? { words: languages.en, clock: null, page: 0, silentAfter: Infinity }
  const w = ctx.words
  const out: Problem[] = []
  const add = (kind: ProblemKind, remedy: Remedy, sentence: string, replica: string | null, fix: Fix | null = null) =>
    out.push({ kind, remedy, sentence, remedySentence: w.remedy[remedy], replica, fix })
  const name = (id: string) => nameOf(id, ctx)
  const label = (t: string) => labelOf(t, ctx)
  for (const d of health.drift.first) {
    add('drift', d.remedy, w.differs(d.problem.replace(/^magic_sync:\s*/, ''), agoOf(d.found_at, ctx)), null, fixOf(d.fix, w))
  }
  if (health.notes.pending > 0) {
    add('notes', health.notes.remedy, w.notesWaiting(health.notes.pending, agoOf(health.notes.oldest_at, ctx)), null)
  }
  for (const s of health.set_aside.first) add('set_aside', s.remedy, w.rowSetAside(label(s.table), s.key, s.reason), null)
  for (const r of health.refused.first) {
    add('refused', r.remedy, w.rowRefused(name(r.replica), label(r.table), r.key, r.reason, r.held_back), r.replica)
  }
  for (const k of health.inbox.first) {
    add('inbox', k.remedy, w.uploadKept(name(k.replica), label(k.table), k.key, k.reason, k.waiting), k.replica)
  }
  for (const f of health.failing.first) {
    add('failing', f.remedy, w.sendsFail(name(f.replica), f.failures, f.last_error), f.replica)
  }
  for (const s of health.stalled.first) {
    add('stalled', s.remedy, w.stalledReplica(name(s.replica), s.messages, spanOf(s.since, ctx), s.heals), s.replica)
  }
  // Fixes first, as the engine lists them; the order within is the engine's.
  return [...out.filter((p) => p.remedy === 'fix'), ...out.filter((p) => p.remedy !== 'fix')]
}

/** How many of the health's items its lists left out (they are cut at the read's limit). */
export function problemsLeftOut(health: OverviewHealth | Health): number {
  const lists = [health.drift, health.set_aside, health.refused, health.inbox, health.failing, health.stalled]
  return lists.reduce((n, l) => n + Math.max(0, l.total - l.first.length), 0)
}

// ---------------------------------------------------------------------------
// One replica's progress.

export interface ProgressTable {
  table: string
  label: string
  held: number
  should: number
  /** "holds 480 of 500" */
  holds: string
  inFlight: number
  setAside: number
  toRemove: number
}

export interface ProgressView {
  replica: string
  name: string
  title: string
  snapshot: string | null
  tables: ProgressTable[]
}

/**
 * Each replica's progress, table by table. A row counts as held only once
 * the replica confirmed it; an older version held is not counted.
 */
export function progressOf(progress: Progress, c: Context): ProgressView[] {
  return progress.replicas.map((r) => ({
    replica: r.replica,
    name: nameOf(r.replica, c),
    title: c.words.progressOf(nameOf(r.replica, c)),
    snapshot: r.snapshot_on_its_way ? c.words.snapshotOnItsWay() : null,
    tables: r.tables.map((t) => ({
      table: t.table,
      label: labelOf(t.table, c),
      held: t.holds - t.outdated,
      should: t.should,
      holds: c.words.holdsOf(t.holds - t.outdated, t.should),
      inFlight: t.in_flight,
      setAside: t.set_aside,
      toRemove: t.to_remove,
    })),
  }))
}

// ---------------------------------------------------------------------------
// Where one row is, and why.

export interface PlaceLine {
  replica: string
  name: string
  state: RowState
  tone: Tone
  sentence: string
}

export interface PlacesView {
  title: string
  lines: PlaceLine[]
  unconcerned: string | null
}

export function placesOf(row: RowProgress, c: Context): PlacesView {
  const w = c.words
  return {
    title: w.placesOf(labelOf(row.table, c), row.key),
    lines: row.places.map((p) => ({
      replica: p.replica,
      name: nameOf(p.replica, c),
      state: p.state,
      tone: p.state === 'holds' ? 'ok' : p.state === 'set_aside' ? 'fix' : 'busy',
      sentence: p.refused ? `${w.place[p.state]} ${w.placeRefused(p.refused)}` : w.place[p.state],
    })),
    unconcerned: row.unconcerned > 0 ? w.unconcerned(row.unconcerned) : null,
  }
}

/** The answer of sync.explain, as sentences: where the row is, why it goes there, what keeps it away. */
export function explainOf(e: Explain, c: Context): string[] {
  const w = c.words
  const label = (t: string) => labelOf(t, c)
  const out = [w.explainState(nameOf(e.replica, c), e.state, e.should)]
  for (const b of e.because) {
    if (b.reason === 'rule') out.push(w.becauseRule(b.rule))
    else if (b.reason === 'follows') out.push(w.becauseFollows(label(b.table), b.key))
    else if (b.reason === 'parent_of') out.push(w.becauseParentOf(label(b.table), b.key))
  }
  for (const k of e.kept_away) {
    switch (k.reason) {
      case 'no_rule':
        out.push(noRuleOf(k, c))
        break
      case 'no_such_row':
        out.push(w.keptNoSuchRow())
        break
      case 'not_live':
        out.push(w.keptNotLive())
        break
      case 'other_partition':
        out.push(w.keptOtherPartition(String(k.row_partition), String(k.replica_partition)))
        break
      case 'outside_active_view':
        out.push(w.keptOutsideView(k.view))
        break
      case 'refused':
        out.push(w.keptRefused(k.why))
        break
      case 'set_aside':
        out.push(w.keptSetAside(label(k.table), k.key, k.why))
        break
      case 'snapshot_on_its_way':
        out.push(w.keptSnapshot())
        break
      case 'unknown_replica':
        out.push(w.keptUnknownReplica())
        break
      default:
        out.push(w.keptOther(String((k as { reason: unknown }).reason)))
    }
  }
  return out
}

type NoRule = Extract<KeptAway, { reason: 'no_rule' }>

/** "register_id = 0196…", each column the rule read beside the value the row holds there. */
function readOf(columns: string[], values: (string | null)[]): string {
  return columns.map((col, i) => `${col} = ${values[i] ?? 'NULL'}`).join(', ')
}

/** Why no rule sends the row to the replica, as what its rule read of the row. */
export function noRuleOf(k: NoRule, c: Context): string {
  const w = c.words
  const read = readOf(k.columns, k.values)
  switch (k.rule) {
    case 'assigned':
      if (k.belongs_to === null) return w.noRuleAssignedToNone(read)
      return w.noRuleAssigned(read, nameOf(k.belongs_to.replica, c), k.belongs_to.live)
    case 'follows':
      return w.noRuleFollows(labelOf(k.follows ?? '', c), read)
    case 'grouped':
      return w.noRuleGrouped(k.groups)
    case 'none':
      return w.noRuleNone()
    default:
      return w.keptNoRule(k.rule)
  }
}

// ---------------------------------------------------------------------------
// Wishes.

export interface WishLine {
  id: string
  replica: string
  name: string
  state: string
  stateLabel: string
  tone: Tone
  sentence: string
  reason: string | null
  note: string | null
}

/** What was wished, as "column = value" pairs. */
function wanted(value: Record<string, unknown>): string {
  return Object.entries(value)
    .map(([k, v]) => `${k} = ${typeof v === 'string' ? `“${v}”` : JSON.stringify(v)}`)
    .join(', ')
}

/** The wishes, in the engine's order (those that need attention first). */
export function wishLines(listing: WishListing, c: Context): WishLine[] {
  const w = c.words
  return listing.wishes.map((x) => ({
    id: x.id,
    replica: x.replica,
    name: nameOf(x.replica, c),
    state: x.state,
    stateLabel: (w.wishState as Record<string, string>)[x.state] ?? x.state,
    tone: x.state === 'refused' ? 'fix' : x.state === 'applied' ? 'ok' : 'busy',
    sentence: w.wishOf(nameOf(x.replica, c), labelOf(x.table, c), wanted(x.wanted)),
    reason: x.reason ? w.wishReason(x.reason) : null,
    note: x.note ? w.wishNote(x.note) : null,
  }))
}
