#!/usr/bin/env node
// The dashboard's benchmark (issue 33): the page over the fleet bench_status
// builds (200 live replicas holding 3,000,000 rows), in headless Chromium,
// first with every row on its way, then caught up. For each state, 1,000
// refreshes one after the other: the time from the answers arriving to the
// page drawn (a frame after Vue's update), the JSON's size per refresh, and
// the page's JavaScript heap (after a collection) and DOM nodes as the
// refreshes go on, split by a heap snapshot into V8's compiled code and the
// objects the page keeps (bench/heap.mjs). Prints figures beside the
// issue's targets, and each memory's last over an early point; asserts none.
//
//   node bench/page.mjs [--bench-status PATH] [--server PATH] [--refreshes N]
//                       [--replicas N --rows N]   (passed to bench_status)
//                       [--page NAME=DIR ...]     builds of the page, measured
//                                                 side by side (dist/app)
//                       [--no-dashboard]          and a page with no dashboard
//                       [--interpreted]           and the last build with V8's
//                                                 compilers off
//
// Each page is measured in a Chromium of its own, one after the other, over
// the same fleet in the same state, each by a magic-sync-dashboard of its
// own serving it (--assets DIR). `--page before=DIR --page after=DIR` puts
// two builds of the package side by side (`npm run build` in two copies of
// dashboard/); `--no-dashboard` adds bench/no-dashboard, the same reads
// fetched, parsed and measured with nothing drawn: what Chromium and V8 do
// by themselves. `--interpreted` measures the last build once more in a
// Chromium whose V8 runs the page's functions in its interpreter only
// (--js-flags=--no-sparkplug --no-maglev --no-opt: nothing compiled to
// machine code), to see how much of the heap's growth is compiled code.
//
// bench_status (tests/src/bin/bench_status.rs) builds the fleet and, with
// --pause, waits after each state: this program reads the connection it
// prints, and presses Enter when done with the state.
import { spawn, execFileSync } from 'node:child_process'
import { dirname, join, resolve } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { measurePage } from './heap.mjs'

const here = dirname(fileURLToPath(import.meta.url))
const root = join(here, '..', '..')
const arg = (name, fallback) => {
  const i = process.argv.indexOf(name)
  return i > 0 ? process.argv[i + 1] : fallback
}
const args = (name) => process.argv.flatMap((a, i) => (a === name && i + 1 < process.argv.length ? [process.argv[i + 1]] : []))
const target = process.env.CARGO_TARGET_DIR ?? join(root, 'target')
const benchStatus = arg('--bench-status', join(target, 'release', 'bench_status'))
const server = arg('--server', join(target, 'release', 'magic-sync-dashboard'))
const refreshes = Number(arg('--refreshes', '1000'))
const passed = ['--replicas', '--rows'].flatMap((n) => (arg(n) ? [n, arg(n)] : []))
const pages = args('--page').map((p) => {
  const [name, dir] = p.includes('=') ? [p.slice(0, p.indexOf('=')), p.slice(p.indexOf('=') + 1)] : [p, p]
  return { name, dir: resolve(dir) }
})
if (pages.length === 0) pages.push({ name: 'this build', dir: join(root, 'dashboard', 'dist', 'app') })
if (process.argv.includes('--no-dashboard')) pages.push({ name: 'no dashboard', dir: join(here, 'no-dashboard') })
const INTERPRETED = ['--js-flags=--no-sparkplug --no-maglev --no-opt']
if (process.argv.includes('--interpreted')) {
  const last = pages.filter((p) => p.name !== 'no dashboard').at(-1)
  pages.push({ ...last, name: `${last.name}, interpreted`, flags: INTERPRETED })
}

function quantile(xs, q) {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]
}

const fleet = spawn(benchStatus, ['--pause', '--runs', '5', ...passed], { stdio: ['pipe', 'pipe', 'inherit'] })
// Its lines, kept until read: bench_status pauses twice.
const lines = []
let wake = () => {}
let ended = false
const fleetLines = createInterface({ input: fleet.stdout })
fleetLines.on('line', (l) => {
  lines.push(l)
  wake()
})
fleetLines.on('close', () => {
  ended = true
  wake()
})
async function paused() {
  for (;;) {
    while (lines.length > 0) {
      const line = lines.shift()
      process.stdout.write(`  | ${line}\n`)
      const m = /\(paused: psql "([^"]+)"/.exec(line)
      if (m) return m[1]
    }
    if (ended) throw new Error('bench_status ended before pausing')
    await new Promise((resolve) => (wake = resolve))
  }
}

let url = await paused()
execFileSync('psql', [url, '-q', '-c', "CREATE ROLE dashboard LOGIN; SELECT sync.allow_reading('dashboard')"])
const reader = url.replace('user=postgres', 'user=dashboard')
const servers = []
for (const p of pages) {
  if (p.flags) continue // served by its build's server
  const dash = spawn(server, ['--database', reader, '--listen', '127.0.0.1:0', '--assets', p.dir], {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  servers.push(dash)
  p.address = await new Promise((resolve) =>
    createInterface({ input: dash.stdout }).once('line', (l) => resolve(l.replace('magic-sync-dashboard: ', '').trim())),
  )
}
for (const p of pages) if (p.flags) p.address = pages.find((q) => q.dir === p.dir && !q.flags).address

const MB = (b) => (b / 1e6).toFixed(3)
const early = Math.round(refreshes / 4)
const marks = [10, early, Math.round(refreshes / 2), Math.round((3 * refreshes) / 4), refreshes]

async function measure(state) {
  // Refreshes one after the other, 20 ms apart: the page's loop as it runs
  // every few seconds, only faster.
  const results = []
  for (const p of pages) results.push({ ...p, ...(await measurePage(p.address, marks, { flags: p.flags ?? [] })) })
  const width = Math.max(12, ...pages.map((p) => p.name.length)) + 2
  console.log(`\n${state}: ${refreshes} refreshes of each page, 20 ms apart (overview, wishes; no listing, no replica picked)`)
  console.log('  answers arrived to page drawn (target: within 100 ms), and the JSON of a refresh (target: at most 200 kB):')
  for (const r of results) {
    const ms = r.drawn.map((d) => d[0])
    const bytes = r.drawn.map((d) => d[1])
    console.log(
      `    ${r.name.padEnd(width)}median ${quantile(ms, 0.5).toFixed(1)} ms, p95 ${quantile(ms, 0.95).toFixed(1)} ms, max ${Math.max(...ms).toFixed(1)} ms; ` +
        `JSON median ${(quantile(bytes, 0.5) / 1000).toFixed(1)} kB, max ${(Math.max(...bytes) / 1000).toFixed(1)} kB` +
        `   (${r.left} of ${refreshes} left out: drawn while the heap was measured)`,
    )
  }
  console.log(`  the page's JavaScript heap after a collection, MB (target: flat), and its last over the early points:`)
  const head = `${'refreshes'.padEnd(15)}${marks.map((n) => String(n).padStart(7)).join('')}`
  console.log(`    ${''.padEnd(width)}${head}${`÷ at ${early}`.padStart(11)}${'÷ at 10'.padStart(10)}`)
  for (const r of results) {
    const row = (label, key) => {
      const xs = r.memories.map((m) => m[key])
      const ratio = (i) => (xs.at(-1) / xs[i]).toFixed(2)
      return `${label.padEnd(15)}${xs.map((x) => MB(x).padStart(7)).join('')}${ratio(1).padStart(11)}${ratio(0).padStart(10)}`
    }
    console.log(`    ${r.name.padEnd(width)}${row('heap', 'heap')}`)
    console.log(`    ${''.padEnd(width)}${row("  V8's code", 'code')}`)
    console.log(`    ${''.padEnd(width)}${row('  the objects', 'objects')}`)
  }
  for (const r of results) {
    const nodes = [...new Set(r.memories.map((m) => m.nodes))].join('/')
    const listeners = [...new Set(r.memories.map((m) => m.listeners))].join('/')
    console.log(`    ${r.name}: ${nodes} DOM nodes, ${listeners} listeners`)
  }
}

console.log(`\nThe page in Debian's Chromium (headless), each build by a server of its own:`)
for (const p of pages) console.log(`  ${p.name}: ${p.dir} at ${p.address}${p.flags ? ` (${p.flags.join(' ')})` : ''}`)
console.log(
  "  (heap: V8's for the page, the least of 4 collections; V8's code: its compiled functions, from a heap snapshot;\n" +
    '   the objects: the rest of the snapshot, what the page keeps; the benchmark takes its own record out of the page first)',
)
await measure('Every row on its way')
fleet.stdin.write('\n')
url = await paused()
await measure('Every replica caught up')
fleet.stdin.write('\n')
for (const s of servers) s.kill()
fleet.kill()
process.exit(0)
