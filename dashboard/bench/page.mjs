#!/usr/bin/env node
// The dashboard's benchmark (issue 33): the page over the fleet bench_status
// builds (200 live replicas holding 3,000,000 rows), in headless Chromium,
// first with every row on its way, then caught up. For each state, 1,000
// refreshes one after the other: the time from the answers arriving to the
// page drawn (a frame after Vue's update), the JSON's size per refresh, and
// the page's JavaScript heap (after a collection) and DOM nodes as the
// refreshes go on. Prints figures beside the targets; asserts none.
//
//   node bench/page.mjs [--bench-status PATH] [--server PATH] [--refreshes N]
//                       [--replicas N --rows N]   (passed to bench_status)
//
// bench_status (tests/src/bin/bench_status.rs) builds the fleet and, with
// --pause, waits after each state: this program reads the connection it
// prints, and presses Enter when done with the state.
import { spawn, execFileSync } from 'node:child_process'
import { dirname, join } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { launch } from '../tests/browser/driver.mjs'

const here = dirname(fileURLToPath(import.meta.url))
const root = join(here, '..', '..')
const arg = (name, fallback) => {
  const i = process.argv.indexOf(name)
  return i > 0 ? process.argv[i + 1] : fallback
}
const target = process.env.CARGO_TARGET_DIR ?? join(root, 'target')
const benchStatus = arg('--bench-status', join(target, 'release', 'bench_status'))
const server = arg('--server', join(target, 'release', 'magic-sync-dashboard'))
const refreshes = Number(arg('--refreshes', '1000'))
const passed = ['--replicas', '--rows'].flatMap((n) => (arg(n) ? [n, arg(n)] : []))

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
const dash = spawn(server, ['--database', reader, '--listen', '127.0.0.1:0', '--assets', join(root, 'dashboard', 'dist', 'app')], {
  stdio: ['ignore', 'pipe', 'inherit'],
})
const address = await new Promise((resolve) =>
  createInterface({ input: dash.stdout }).once('line', (l) => resolve(l.replace('magic-sync-dashboard: ', '').trim())),
)

const { page, close } = await launch()
// The benchmark's own record of each refresh: two numbers each.
await page.addInitScript(() => {
  window.__drawn = []
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) window.__drawn.push([e.duration, e.detail?.bytes ?? 0])
  }).observe({ entryTypes: ['measure'] })
})
const cdp = await page.context().newCDPSession(page)
async function memory() {
  await cdp.send('HeapProfiler.collectGarbage')
  const heap = await cdp.send('Runtime.getHeapUsage')
  const dom = await cdp.send('Memory.getDOMCounters')
  return { heap: heap.usedSize, nodes: dom.nodes, listeners: dom.jsEventListeners }
}

async function measure(state) {
  // Refreshes one after the other, 20 ms apart: the page's loop as it runs
  // every few seconds, only faster.
  await page.goto(`${address}?every=20`)
  await page.waitForFunction(() => window.__drawn.length >= 10, null, { timeout: 120000 })
  const marks = [10, Math.round(refreshes / 4), Math.round(refreshes / 2), Math.round((3 * refreshes) / 4), refreshes]
  const memories = []
  for (const n of marks) {
    await page.waitForFunction((k) => window.__drawn.length >= k, n, { timeout: 1800000, polling: 200 })
    memories.push({ at: n, ...(await memory()) })
  }
  const drawn = (await page.evaluate(() => window.__drawn)).slice(0, refreshes)
  const ms = drawn.map((d) => d[0])
  const bytes = drawn.map((d) => d[1])
  console.log(`\n${state}: ${drawn.length} refreshes (overview, wishes; no listing, no replica picked)`)
  console.log(`  answers arrived to page drawn: median ${quantile(ms, 0.5).toFixed(1)} ms, p95 ${quantile(ms, 0.95).toFixed(1)} ms, max ${Math.max(...ms).toFixed(1)} ms   (target: within 100 ms)`)
  console.log(`  JSON per refresh: median ${(quantile(bytes, 0.5) / 1000).toFixed(1)} kB, max ${(Math.max(...bytes) / 1000).toFixed(1)} kB   (target: at most 200 kB)`)
  console.log('  the page after a collection (target: flat):')
  for (const m of memories) {
    console.log(`    after ${String(m.at).padStart(5)} refreshes: JS heap ${(m.heap / 1e6).toFixed(2)} MB, ${m.nodes} DOM nodes, ${m.listeners} listeners`)
  }
}

console.log(`\nThe page at ${address}, in Debian's Chromium (headless)`)
await measure('Every row on its way')
fleet.stdin.write('\n')
url = await paused()
await measure('Every replica caught up')
fleet.stdin.write('\n')
await close()
dash.kill()
fleet.kill()
process.exit(0)
