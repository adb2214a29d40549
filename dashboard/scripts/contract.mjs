#!/usr/bin/env node
// Writes src/core/contract/types.ts from what the engine answers: the
// golden JSON of every read in every state (tests/golden/status/, written
// by the engine's tests) and the dashboard's own fixtures (fixtures/,
// written by dashboard/server/tests/fixtures.rs). Every field of every
// answer becomes a field of a type, so a field renamed, added or removed on
// the engine's side changes the types, and the package's type check fails
// where it reads the old one.
//
//   node scripts/contract.mjs           writes the types
//   node scripts/contract.mjs --check   fails if the types written differ
//
// The test command runs --check; a vitest test does the same.
import { readFileSync, readdirSync, writeFileSync, existsSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const here = dirname(fileURLToPath(import.meta.url))
const root = join(here, '..')
export const sources = [join(root, '..', 'tests', 'golden', 'status'), join(root, 'fixtures')]
export const target = join(root, 'src', 'core', 'contract', 'types.ts')

// Each read, by the start of its files' names, and the name of its answer.
const reads = [
  ['row-progress', 'RowProgress'],
  ['overview', 'Overview'],
  ['listing', 'Listing'],
  ['health', 'Health'],
  ['progress', 'Progress'],
  ['explain', 'Explain'],
  ['wishes', 'WishListing'],
]

// The names of the types inside the answers, by where they are: the named
// type above them, then the fields down to them (`[]` for an array's items).
const names = {
  'Overview.states': 'StateCounts',
  'Overview.replicas': 'WorstReplicas',
  'WorstReplicas.first[]': 'Replica',
  'Overview.tables[]': 'TableFigures',
  'Overview.health': 'OverviewHealth',
  'Listing.replicas[]': 'Replica',
  'Replica.why': 'Why',
  'Replica.backlog': 'Backlog',
  'Backlog.tables[]': 'BacklogTable',
  'Replica.wishes': 'WishCounts',
  'Health.notes': 'Notes',
  'OverviewHealth.notes': 'Notes',
  'Health.set_aside.first[]': 'SetAsideRow',
  'OverviewHealth.set_aside.first[]': 'SetAsideRow',
  'Health.refused.first[]': 'RefusedRow',
  'OverviewHealth.refused.first[]': 'RefusedRow',
  'Health.inbox.first[]': 'KeptUpload',
  'OverviewHealth.inbox.first[]': 'KeptUpload',
  'Health.failing.first[]': 'FailingReplica',
  'OverviewHealth.failing.first[]': 'FailingReplica',
  'Health.stalled.first[]': 'StalledReplica',
  'OverviewHealth.stalled.first[]': 'StalledReplica',
  'Progress.replicas[]': 'ReplicaProgress',
  'ReplicaProgress.tables[]': 'TableProgress',
  'RowProgress.places[]': 'Place',
  'Explain.held': 'Held',
  'Explain.because[]': 'Because',
  'Explain.kept_away[]': 'KeptAway',
  'WishListing.wishes[]': 'Wish',
}

// Arrays whose items are of several kinds, told apart by one field.
const discriminated = { Because: 'reason', KeptAway: 'reason' }

// Fields whose values are a closed set, named: the set is what the answers
// hold (ReplicaState: the keys of the overview's counts, which list every
// state, 0 included).
const closed = {
  'Replica.state': 'ReplicaState',
  'Listing.state': 'ReplicaState',
  'Place.state': 'RowState',
  'Explain.state': 'RowState',
  'Wish.state': 'WishState',
  'WishListing.state': 'WishState',
  remedy: 'Remedy',
}

// What the host wrote in a row of its own (a wish's wanted columns, the
// setting as the replica reported it): any columns.
const opaque = new Set(['Wish.wanted', 'Wish.reported'])

// The golden files mask what changes from run to run. A masked field is a
// time (`now`, `since`, `*_at`), or one of these.
const masks = new Set(['<masked>', '<time>'])
const maskedKinds = { oldest_age_seconds: 'number', message: 'string', version: 'string', answered: 'string' }
const isTime = (key) => key === 'now' || key === 'since' || key === 'at' || key.endsWith('_at') || key.endsWith('_since')

/** What the samples of one place hold, merged. */
function blank() {
  return { nul: false, bool: false, num: false, str: false, time: false, masked: null, values: new Set(), obj: null, arr: null, named: null, closed: null }
}

function merge(into, value, key, path) {
  if (typeof value === 'boolean') into.bool = true
  else if (typeof value === 'number') into.num = true
  else if (masks.has(value)) {
    if (isTime(key)) into.time = true
    else if (maskedKinds[key]) into.masked = maskedKinds[key]
    else throw new Error(`${path}: a masked value of unknown kind (add "${key}" to maskedKinds)`)
  } else {
    into.str = true
    into.values.add(value)
  }
}

/**
 * Reads every answer, and gathers the shapes of the named types: one
 * shape per name however many places it appears in.
 */
export function gather(files) {
  const types = new Map() // name -> { shape | variants }
  const contracts = new Set()
  const order = []
  const use = (name) => {
    if (!types.has(name)) {
      types.set(name, { shape: blank(), variants: new Map() })
      order.push(name)
    }
    return types.get(name)
  }
  // Walks a value at a path relative to the named type above it,
  // sending named parts to their own type.
  const walk = (value, owner, rel, into, key) => {
    const here = rel ? `${owner}.${rel}` : owner
    const name = rel ? names[here] : null
    if (name && value !== null) {
      into.named = name
      if (Array.isArray(value)) throw new Error(`${here}: a named place holds an array`)
      if (typeof value !== 'object') throw new Error(`${here}: a named place holds a ${typeof value}`)
      const t = use(name)
      if (discriminated[name]) {
        const by = value[discriminated[name]]
        if (!t.variants.has(by)) t.variants.set(by, { shape: blank() })
        walkObject(value, name, t.variants.get(by).shape)
      } else {
        walkObject(value, name, t.shape)
      }
      return
    }
    if (opaque.has(here)) {
      if (value === null) into.nul = true
      else into.opaque = true
      return
    }
    if (value === null) {
      into.nul = true
      into.key = key
      const enumName = closed[here] ?? closed[key]
      if (enumName) into.closed = enumName
      return
    }
    if (Array.isArray(value)) {
      into.arr ??= { item: null }
      into.arr.item ??= blank()
      for (const item of value) walk(item, owner, `${rel}[]`, into.arr.item, key)
      return
    }
    if (typeof value === 'object') {
      into.obj ??= { fields: new Map(), count: 0 }
      into.obj.count += 1
      for (const [k, v] of Object.entries(value)) {
        if (!into.obj.fields.has(k)) into.obj.fields.set(k, { shape: blank(), count: 0 })
        const f = into.obj.fields.get(k)
        f.count += 1
        walk(v, owner, rel ? `${rel}.${k}` : k, f.shape, k)
      }
      return
    }
    merge(into, value, key, here)
    const enumName = closed[here] ?? closed[key]
    if (enumName) into.closed = enumName
  }
  const walkObject = (value, name, shape) => {
    shape.obj ??= { fields: new Map(), count: 0 }
    shape.obj.count += 1
    for (const [k, v] of Object.entries(value)) {
      if (!shape.obj.fields.has(k)) shape.obj.fields.set(k, { shape: blank(), count: 0 })
      const f = shape.obj.fields.get(k)
      f.count += 1
      walk(v, name, k, f.shape, k)
    }
  }
  for (const { file, read, value } of files) {
    if (typeof value.contract !== 'number') throw new Error(`${file}: no contract`)
    contracts.add(value.contract)
    const t = use(read)
    walkObject(value, read, t.shape)
  }
  if (contracts.size !== 1) throw new Error(`the answers carry several contracts: ${[...contracts].join(', ')}`)
  return { types, order, contract: [...contracts][0] }
}

/** The values a closed set takes, over every place that holds it. */
function closedValues(types) {
  const values = new Map()
  const visit = (shape) => {
    if (!shape) return
    if (shape.closed) {
      if (!values.has(shape.closed)) values.set(shape.closed, new Set())
      for (const v of shape.values) values.get(shape.closed).add(v)
    }
    if (shape.arr) visit(shape.arr.item)
    if (shape.obj) for (const f of shape.obj.fields.values()) visit(f.shape)
  }
  for (const t of types.values()) {
    visit(t.shape)
    for (const v of t.variants.values()) visit(v.shape)
  }
  return values
}

function render(shape, indent, where) {
  const parts = []
  if (shape.opaque) parts.push('Record<string, unknown>')
  if (shape.named) parts.push(shape.named)
  else if (shape.obj) parts.push(renderObject(shape.obj, indent, where))
  if (shape.arr) {
    const item = shape.arr.item && (shape.arr.item.named || shape.arr.item.obj || shape.arr.item.str || shape.arr.item.num || shape.arr.item.bool || shape.arr.item.time)
      ? render(shape.arr.item, indent, `${where}[]`)
      : null
    // Empty here, but the type of its items is known from elsewhere.
    const known = names[`${where}[]`]
    if (item === null && known && gathered.has(known)) {
      parts.push(`${known}[]`)
    } else if (item === null) throw new Error(`${where}: an array never seen with an item (add a fixture that has one)`)
    else parts.push(item.includes('|') ? `Array<${item}>` : `${item}[]`)
  }
  if (shape.closed) parts.push(shape.closed)
  else if (shape.str) parts.push('string')
  if (shape.time) parts.push('Timestamp')
  if (shape.masked && !(shape.masked === 'string' && shape.str)) parts.push(shape.masked)
  if (shape.num && shape.masked !== 'number') parts.push('number')
  if (shape.bool) parts.push('boolean')
  if (parts.length === 0) {
    // Only ever null in what the engine answered: its kind is known by its
    // name or not at all.
    if (shape.key && isTime(shape.key)) parts.push('Timestamp')
    else if (shape.key && maskedKinds[shape.key]) parts.push(maskedKinds[shape.key])
    else return 'unknown'
  }
  if (shape.nul) parts.push('null')
  return [...new Set(parts)].join(' | ')
}

function renderObject(obj, indent, where, discriminant) {
  const pad = '  '.repeat(indent + 1)
  const lines = ['{']
  for (const [k, f] of [...obj.fields.entries()].sort(([a], [b]) => (a < b ? -1 : 1))) {
    if (f.count !== obj.count) {
      throw new Error(`${where}.${k}: in ${f.count} of ${obj.count} answers (every field is always there)`)
    }
    const type = k === discriminant ? [...f.shape.values].map((v) => JSON.stringify(v)).join(' | ') : render(f.shape, indent + 1, `${where}.${k}`)
    lines.push(`${pad}${/^[a-z_][a-z0-9_]*$/i.test(k) ? k : JSON.stringify(k)}: ${type}`)
  }
  lines.push(`${'  '.repeat(indent)}}`)
  return lines.join('\n')
}

// The named types gathered, for an array empty in one place whose items
// another place shows.
let gathered = new Map()

export function typesText(files) {
  const { types, order, contract } = gather(files)
  gathered = types
  const values = closedValues(types)
  const out = []
  out.push('// Written by scripts/contract.mjs from the engine\'s answers (tests/golden/status/')
  out.push('// and fixtures/): do not edit. `npm run contract` writes it again.')
  out.push('')
  out.push('/** The version of the answers\' JSON this package reads. */')
  out.push(`export const CONTRACT = ${contract} as const`)
  out.push('')
  out.push('/** A time as the server wrote it (a PostgreSQL timestamptz). */')
  out.push('export type Timestamp = string')
  out.push('')
  out.push('/** The states a replica is in: every key of the overview\'s counts. */')
  out.push('export type ReplicaState = Extract<keyof StateCounts, string>')
  for (const [name, set] of [...values.entries()].sort(([a], [b]) => (a < b ? -1 : 1))) {
    if (name === 'ReplicaState') continue
    out.push('')
    out.push(`export type ${name} = ${[...set].sort().map((v) => JSON.stringify(v)).join(' | ')}`)
  }
  for (const name of order) {
    const t = types.get(name)
    out.push('')
    if (discriminated[name]) {
      const variants = [...t.variants.entries()].sort(([a], [b]) => (a < b ? -1 : 1))
      const key = discriminated[name]
      out.push(`export type ${name} =`)
      for (const [, v] of variants) {
        out.push(`  | ${renderObject(v.shape.obj, 1, name, key)}`)
      }
    } else {
      out.push(`export interface ${name} ${renderObject(t.shape.obj, 0, name)}`)
    }
  }
  return out.join('\n') + '\n'
}

/** Every answer of every source, its read told by its file's name. */
export function answers() {
  const files = []
  for (const dir of sources) {
    if (!existsSync(dir)) continue
    for (const name of readdirSync(dir).filter((n) => n.endsWith('.json')).sort()) {
      const read = reads.find(([prefix]) => name.startsWith(`${prefix}-`))
      if (!read) throw new Error(`${join(dir, name)}: no read starts its name`)
      files.push({ file: join(dir, name), name, read: read[1], value: JSON.parse(readFileSync(join(dir, name), 'utf8')) })
    }
  }
  return files
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const text = typesText(answers())
  if (process.argv.includes('--check')) {
    const now = existsSync(target) ? readFileSync(target, 'utf8') : ''
    if (now !== text) {
      console.error(`${target} is not what the engine's answers give: run \`npm run contract\` and fix what the type check then finds`)
      process.exit(1)
    }
    console.log('the types are those of the engine\'s answers')
  } else {
    writeFileSync(target, text)
    console.log(`wrote ${target}`)
  }
}
