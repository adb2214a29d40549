// The page's memory as the benchmark measures it, over the DevTools
// protocol of a playwright-core page in Debian's Chromium (the flags of
// tests/browser/driver.mjs; no browser is ever downloaded).
//
// The JavaScript heap after a collection (Runtime.getHeapUsage's usedSize)
// is what V8 holds for the page's isolate, and V8 keeps more in it than the
// page's own objects: the page's functions compiled (bytecode, then machine
// code as they grow hot, with the feedback and the dependencies optimized
// code keeps). That part grows over the first refreshes and then stops, and
// is not the page's to keep. A heap snapshot tells the two apart: each
// measure says the heap, V8's compiled code in it, and the rest, the
// objects the page keeps.
import { launch } from '../tests/browser/driver.mjs'

// V8's own nodes of a snapshot that belong to compiled code: its
// deoptimization data, the wrappers of the functions it inlined, and the
// lists of code that depends on a shape or a global (WeakArrayList).
const CODE_NATIVES = ['system / ProtectedFixedArray', 'system / SharedFunctionInfoWrapper', 'system / WeakArrayList']

/**
 * The JavaScript heap of the page's isolate after a collection, in bytes:
 * the least of `tries` collections, each measured at once. The page goes on
 * refreshing meanwhile, and what it allocated between the collection and
 * the measure is counted too (up to a refresh's answers, 0.1 MB): the
 * least is the nearest to what it keeps.
 */
export async function heapAfterCollection(cdp, tries = 4) {
  let least = Infinity
  for (let i = 0; i < tries; i++) {
    await cdp.send('HeapProfiler.collectGarbage')
    const { usedSize } = await cdp.send('Runtime.getHeapUsage')
    least = Math.min(least, usedSize)
  }
  return least
}

/**
 * A heap snapshot's JavaScript heap, split: `code`, V8's compiled
 * functions (nodes of type code, and the natives above); `objects`,
 * everything else the page's isolate holds (objects, arrays, strings,
 * closures, shapes, V8's other nodes). Blink's own objects (its natives
 * not of V8) are not in the JavaScript heap and are left out. The two add
 * up to the heap after a collection, within a few kB. Bytes.
 */
export async function heapSplit(cdp) {
  const chunks = []
  const take = (e) => chunks.push(e.chunk)
  cdp.on('HeapProfiler.addHeapSnapshotChunk', take)
  try {
    await cdp.send('HeapProfiler.takeHeapSnapshot', { reportProgress: false })
  } finally {
    cdp.off('HeapProfiler.addHeapSnapshotChunk', take)
  }
  const s = JSON.parse(chunks.join(''))
  const meta = s.snapshot.meta
  const width = meta.node_fields.length
  const typeAt = meta.node_fields.indexOf('type')
  const nameAt = meta.node_fields.indexOf('name')
  const sizeAt = meta.node_fields.indexOf('self_size')
  const types = meta.node_types[0]
  let code = 0
  let objects = 0
  for (let i = 0; i < s.nodes.length; i += width) {
    const type = types[s.nodes[i + typeAt]]
    const size = s.nodes[i + sizeAt]
    if (type === 'code') code += size
    else if (type === 'native') {
      const name = s.strings[s.nodes[i + nameAt]]
      // Blink's, and the text of external strings (the scripts' source),
      // which lives outside the heap.
      if (!name.startsWith('system / ') || name.startsWith('system / ExternalStringData')) continue
      if (CODE_NATIVES.some((n) => name.startsWith(n))) code += size
      else objects += size
    } else if (type !== 'synthetic') objects += size
  }
  return { code, objects }
}

/**
 * Opens `url` (a page that reads every `?every=` ms and measures each
 * refresh as 'msd:drawn', as app/App.vue does) in a Chromium of its own,
 * and after each count of refreshes in `marks` measures its memory. The
 * benchmark's own record of each refresh is taken out of the page before
 * each measure, so the page's heap holds none of it. Refreshes during which
 * a measure ran (a snapshot stops the page for a while) are left out of the
 * times. `flags`: more of Chromium's, after the benchmark's. Returns
 * { drawn: [[ms, bytes]] of the first marks.at(-1) refreshes, left: how
 * many of those were left out, memories: [...] }.
 */
export async function measurePage(url, marks, { every = 20, timeout = 1800000, flags = [] } = {}) {
  const { page, close } = await launch(flags)
  try {
    await page.addInitScript(() => {
      window.__count = 0
      window.__drawn = []
      new PerformanceObserver((list) => {
        for (const e of list.getEntries()) {
          window.__count++
          window.__drawn.push([e.startTime, e.duration, e.detail?.bytes ?? 0])
        }
      }).observe({ entryTypes: ['measure'] })
    })
    const cdp = await page.context().newCDPSession(page)
    const record = []
    const busy = []
    const memories = []
    await page.goto(`${url}?every=${every}`)
    for (const n of marks) {
      await page.waitForFunction((k) => window.__count >= k, n, { timeout, polling: 200 })
      const from = await page.evaluate(() => performance.now())
      record.push(...(await page.evaluate(() => window.__drawn.splice(0))))
      const heap = await heapAfterCollection(cdp)
      const dom = await cdp.send('Memory.getDOMCounters')
      const split = await heapSplit(cdp)
      const to = await page.evaluate(() => performance.now())
      busy.push([from, to])
      memories.push({ at: n, heap, ...split, nodes: dom.nodes, listeners: dom.jsEventListeners })
    }
    const counted = record.slice(0, marks.at(-1))
    const kept = counted.filter(([start, ms]) => !busy.some(([a, b]) => start < b && start + ms > a))
    return { drawn: kept.map(([, ms, bytes]) => [ms, bytes]), left: counted.length - kept.length, memories }
  } finally {
    await close()
  }
}
